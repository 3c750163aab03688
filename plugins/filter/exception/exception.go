// Package exception is Dubbo's ExceptionFilter for Go providers: it keeps a
// consumer from receiving an exception it cannot decode, and puts the
// provider's own faults in the provider's log.
//
// Java's filter passes checked exceptions and those in the method's throws
// clause, logs the rest at error level, and then still passes JDK
// exceptions (java., javax.), Dubbo's RpcException and exceptions from the
// interface's own jar; anything else is replaced by a RuntimeException whose
// message is the original's class and message, because a consumer without
// that class would fail to decode the response instead of seeing an error.
//
// A Go method has no throws clause and no checked exceptions: the error it
// returns is its declared contract. So here:
//
//   - an error without a Java class (a plain Go error; it travels as
//     java.lang.Throwable, which every consumer has) and every framework error
//     pass as they are;
//   - a panic in the method (proxy.PanicError) is the unchecked, undeclared
//     case: logged at error level with its stack and the caller's address,
//     and sent as java.lang.RuntimeException with the panic's message (the
//     stack stays in the provider's log);
//   - a business error naming a Java class passes when the class is the
//     JDK's (java., javax., jakarta.), Dubbo's (org.apache.dubbo.,
//     com.alibaba.dubbo.) or in the service interface's package or below it
//     (Go's stand-in for "the interface's jar", which the consumer has);
//     any other class is logged and wrapped as java.lang.RuntimeException
//     with "class: message".
//
// Log lines are limited to one per service, method and class per
// LogInterval, with the number left out, since a caller can raise the same
// error as often as it likes. `filter: "-exception"` sends every error as
// it is.
package exception

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

// Name is the filter's extension name, Dubbo's.
const Name = "exception"

// RuntimeException is the class a wrapped error travels as.
const RuntimeException = "java.lang.RuntimeException"

// LogInterval is the least time between two log lines about the same
// service, method and exception class.
const LogInterval = 30 * time.Second

// maxKeys bounds the rate limiter's table; past it, lines are not limited
// per key but by one shared slot.
const maxKeys = 4096

// Activation: every provider, as Dubbo's (`@Activate(group = PROVIDER)`,
// order 0).
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}}
}

// New returns the filter, logging to log (slog.Default() when nil).
func New(log *slog.Logger) extension.Filter {
	if log == nil {
		log = slog.Default()
	}
	return &filter{log: log, now: time.Now, seen: map[string]*logSlot{}}
}

type filter struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]*logSlot
}

type logSlot struct {
	last    time.Time
	dropped int
}

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	res, err := next.Invoke(ctx, inv)
	if err == nil || !kernel.IsBiz(err) {
		return res, err
	}
	svc := next.URL().ServiceKey()
	var pe *proxy.PanicError
	if errors.As(err, &pe) {
		f.report(svc, inv, "(panic)", "weft: provider method panicked; the consumer gets java.lang.RuntimeException",
			slog.String("panic", pe.Error()), slog.String("stack", string(pe.Stack)))
		return res, &kernel.Error{Code: kernel.CodeBiz, Class: RuntimeException, Msg: pe.Error(), Cause: err}
	}
	class := javaClass(err)
	if class == "" || Passes(class, next.URL().Interface()) {
		return res, err
	}
	msg := message(err)
	f.report(svc, inv, class, "weft: undeclared exception wrapped as java.lang.RuntimeException: its class is neither the JDK's, Dubbo's nor in the service's package, so a consumer may not have it",
		slog.String("exception", class+": "+msg))
	text := class
	if msg != "" {
		text += ": " + msg
	}
	return res, &kernel.Error{Code: kernel.CodeBiz, Class: RuntimeException, Msg: text, Cause: err}
}

// Passes reports whether an exception of class may go to a consumer of
// iface (a Java interface name) as it is: Dubbo's rules, with the
// interface's package for its jar.
func Passes(class, iface string) bool {
	for _, p := range []string{"java.", "javax.", "jakarta.", "org.apache.dubbo.", "com.alibaba.dubbo."} {
		if strings.HasPrefix(class, p) {
			return true
		}
	}
	i := strings.LastIndexByte(iface, '.')
	if i <= 0 {
		// No package to compare with: Java passes when it cannot tell
		// the interface's jar either.
		return true
	}
	return strings.HasPrefix(class, iface[:i+1])
}

// javaClass is the Java class err travels as: a business error's Class,
// or the class of an exception value in its chain (the hessian library's
// Throwabler, or any type that names its class the same way).
func javaClass(err error) string {
	var ke *kernel.Error
	if errors.As(err, &ke) && ke.Code == kernel.CodeBiz && ke.Class != "" {
		return ke.Class
	}
	var jc interface {
		error
		JavaClassName() string
	}
	if errors.As(err, &jc) {
		return jc.JavaClassName()
	}
	return ""
}

// message is the exception's message without its class.
func message(err error) string {
	var ke *kernel.Error
	if errors.As(err, &ke) && ke.Code == kernel.CodeBiz && ke.Class != "" {
		if ke.Msg != "" || ke.Cause == nil {
			return ke.Msg
		}
		return ke.Cause.Error()
	}
	return err.Error()
}

// report logs at error level, at most once per service, method and class
// per LogInterval; the next line says how many were left out.
func (f *filter) report(svc string, inv *kernel.Invocation, class, msg string, attrs ...slog.Attr) {
	key := svc + "\x00" + inv.Method + "\x00" + class
	now := f.now()
	f.mu.Lock()
	s := f.seen[key]
	if s == nil {
		if len(f.seen) >= maxKeys {
			key = ""
			s = f.seen[key]
		}
		if s == nil {
			s = &logSlot{}
			f.seen[key] = s
		}
	}
	if !s.last.IsZero() && now.Sub(s.last) < LogInterval {
		s.dropped++
		f.mu.Unlock()
		return
	}
	dropped := s.dropped
	s.last, s.dropped = now, 0
	f.mu.Unlock()

	remote := inv.RemoteAddr
	if remote == "" {
		remote = "(in process)"
	}
	all := []slog.Attr{slog.String("service", svc), slog.String("method", inv.Method), slog.String("remote", remote)}
	all = append(all, attrs...)
	if dropped > 0 {
		all = append(all, slog.Int("suppressed", dropped))
	}
	f.log.LogAttrs(context.Background(), slog.LevelError, msg, all...)
}
