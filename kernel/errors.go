package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Code classifies an RPC failure. The numbers are Dubbo's RpcException codes
// where Dubbo has one, so logs and metrics read the same across both.
type Code uint8

const (
	CodeUnknown         Code = 0
	CodeNetwork         Code = 1
	CodeTimeout         Code = 2
	CodeBiz             Code = 3
	CodeForbidden       Code = 4
	CodeSerialization   Code = 5
	CodeNoProvider      Code = 6
	CodeLimitExceeded   Code = 7
	CodeMethodNotFound  Code = 11
	CodeServiceNotFound Code = 14
	// CodeShuttingDown: the provider is stopping and refuses new calls
	// (Dubbo's status 80 during graceful shutdown); weft's own number.
	CodeShuttingDown Code = 15
)

// codeInfo is the one table of codes: a name (also the code's wire form in
// error texts, see ParseText) and whether a cluster strategy may send a call
// that failed with it to another provider. A retry is one another provider
// could answer: the call did not reach, was not taken, or was not finished
// in time by this one. A call that was refused for what it is (forbidden, bad
// arguments, a method that does not exist, an answer too large to send) or
// that the service itself answered (a business error) fails the same way
// everywhere, so it is never retried; nor is an unknown failure, which
// cannot be shown to be safe to repeat.
var codeInfo = map[Code]struct {
	name  string
	retry bool
}{
	CodeUnknown:         {"unknown", false},
	CodeNetwork:         {"network", true},
	CodeTimeout:         {"timeout", true},
	CodeBiz:             {"biz", false},
	CodeForbidden:       {"forbidden", false},
	CodeSerialization:   {"serialization", false},
	CodeNoProvider:      {"no provider", false},
	CodeLimitExceeded:   {"limit exceeded", true},
	CodeMethodNotFound:  {"method not found", false},
	CodeServiceNotFound: {"service not found", true},
	CodeShuttingDown:    {"shutting down", true},
}

func (c Code) String() string {
	if i, ok := codeInfo[c]; ok {
		return i.name
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Retryable reports whether a call that failed with err may be tried again
// on another provider: see codeInfo. A business error never is.
func Retryable(err error) bool {
	return err != nil && codeInfo[CodeOf(err)].retry
}

// Error is an RPC failure with a Code. Framework failures (every code but
// CodeBiz) may be retried by a cluster strategy; a business error, raised by
// the service implementation itself, never is.
type Error struct {
	Code Code
	// Msg says what went wrong and, where it helps, what to do.
	Msg string
	// ServerSide marks a timeout that the provider detected (Dubbo status 31)
	// rather than the consumer (status 30).
	ServerSide bool
	// Class is the exception class of a business error raised by a Java
	// provider ("java.lang.IllegalStateException"); empty for Go providers.
	Class string
	// Cause is the underlying error, reachable through errors.Is/As.
	Cause error
}

func (e *Error) Error() string {
	if e.Code == CodeBiz {
		s := e.biz()
		if s == "" && e.Cause != nil {
			return e.Cause.Error()
		}
		return s
	}
	return "weft: " + e.Code.String() + ": " + e.text()
}

// biz is the text of a business error: the Java class and message.
func (e *Error) biz() string {
	switch {
	case e.Class != "" && e.Msg != "":
		return e.Class + ": " + e.Msg
	case e.Class != "":
		return e.Class
	}
	return e.Msg
}

// text is the error without the "weft: <code>: " prefix. A cause that is
// a framework error itself is written without its prefix, or with only its
// code when that differs, so that one message reads "weft: timeout:
// failover ... gave up ...: no response from ..." rather than repeating
// "weft: timeout:" at every layer.
func (e *Error) text() string {
	s := e.biz()
	if e.Cause == nil {
		return s
	}
	var cs string
	var ce *Error
	if errors.As(e.Cause, &ce) && ce.Code != CodeBiz && ce == e.Cause {
		cs = ce.text()
		if ce.Code != e.Code {
			cs = ce.Code.String() + ": " + cs
		}
	} else {
		cs = e.Cause.Error()
	}
	if s == "" {
		return cs
	}
	return s + ": " + cs
}

// Text is the error's message without the "weft: <code>: " prefix: what a
// protocol puts on the wire beside the code.
func (e *Error) Text() string { return e.text() }

// WireText is the form of a framework error in a protocol that carries only
// a text (the dubbo protocol's error responses): "weft: <code>: <message>",
// readable by Java and dubbo-go consumers as it is, and parsed back into
// the code by ParseText.
func WireText(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeBiz {
		return e.Error()
	}
	return err.Error()
}

// ParseText reads a text written by WireText: the code and the message
// after the prefix; ok is false for any other text (a Java provider's stack
// trace), which the caller classifies by other means.
func ParseText(s string) (code Code, msg string, ok bool) {
	rest, found := strings.CutPrefix(s, "weft: ")
	if !found {
		return CodeUnknown, s, false
	}
	name, msg, found := strings.Cut(rest, ": ")
	if !found {
		return CodeUnknown, s, false
	}
	c, known := codeByName[name]
	if !known || c == CodeBiz {
		return CodeUnknown, s, false
	}
	return c, msg, true
}

var codeByName = func() map[string]Code {
	m := make(map[string]Code, len(codeInfo))
	for c, i := range codeInfo {
		m[i.name] = c
	}
	return m
}()

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds a framework error with a code.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap builds a framework error with a code around a cause.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Cause: cause}
}

// BizError marks err, returned by a service implementation, as a business
// error. An error that already is one is returned as it is.
func BizError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e.Code == CodeBiz {
		return err
	}
	return &Error{Code: CodeBiz, Cause: err}
}

// CodeOf returns the code of err: CodeUnknown for errors that carry none,
// CodeTimeout for context.DeadlineExceeded.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout
	}
	return CodeUnknown
}

// IsBiz reports whether err is a business error of the service
// implementation, as opposed to any failure of the framework.
func IsBiz(err error) bool { return err != nil && CodeOf(err) == CodeBiz }
