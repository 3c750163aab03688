// Package timeout is Dubbo's provider TimeoutFilter. It bounds the
// implementation by the service's `timeout` (method-level first) through the
// context's deadline — which may be earlier already: the dubbo protocol
// bounds each call by the time its consumer still waits — and when a call
// still ends after its deadline it logs the slow call and answers with a
// server-side timeout error rather than a result the consumer has stopped
// waiting for.
package timeout

import (
	"context"
	"log/slog"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "timeout"

// Activation: every provider call.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}}
}

// New returns the filter; log receives the slow-call warnings.
func New(log *slog.Logger) extension.Filter { return &filter{log: log} }

type filter struct{ log *slog.Logger }

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	if t := u.MethodTimeout(inv.Method, 0); t > 0 {
		// A protocol may have set this bound already (dubbo does, with the
		// consumer's): only a shorter one is added.
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > t {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, t)
			defer cancel()
		}
	}
	deadline, bounded := ctx.Deadline()
	if !bounded {
		return next.Invoke(ctx, inv)
	}
	start := time.Now()
	res, err := next.Invoke(ctx, inv)
	if end := time.Now(); end.After(deadline) {
		took := end.Sub(start)
		f.log.Warn("weft: provider call ran past its deadline (its own timeout or the time its consumer waits)",
			"service", u.ServiceKey(), "method", inv.Method, "took", took, "remote", inv.RemoteAddr)
		if err == nil || kernel.IsBiz(err) {
			return kernel.Result{}, &kernel.Error{Code: kernel.CodeTimeout, ServerSide: true,
				Msg: "provider " + u.ServiceKey() + "." + inv.Method + " took " + took.String() + ", past its deadline (its `timeout` or its consumer's); raise `timeout` or speed the method up"}
		}
	}
	return res, err
}
