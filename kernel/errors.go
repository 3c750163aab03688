package kernel

import (
	"context"
	"errors"
	"fmt"
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
)

var codeNames = map[Code]string{
	CodeUnknown:         "unknown",
	CodeNetwork:         "network",
	CodeTimeout:         "timeout",
	CodeBiz:             "biz",
	CodeForbidden:       "forbidden",
	CodeSerialization:   "serialization",
	CodeNoProvider:      "no provider",
	CodeLimitExceeded:   "limit exceeded",
	CodeMethodNotFound:  "method not found",
	CodeServiceNotFound: "service not found",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", uint8(c))
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
	var s string
	switch {
	case e.Class != "" && e.Msg != "":
		s = e.Class + ": " + e.Msg
	case e.Class != "":
		s = e.Class
	default:
		s = e.Msg
	}
	if e.Code == CodeBiz {
		if s == "" && e.Cause != nil {
			return e.Cause.Error()
		}
		return s
	}
	if e.Cause != nil && s == "" {
		s = e.Cause.Error()
	} else if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return "weft: " + e.Code.String() + ": " + s
}

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
