// Package executelimit is Dubbo's ExecuteLimitFilter: `executes=N` on a
// service (or `m.executes` on one method) lets at most N calls of each method
// run at once on this provider; a call over the limit is rejected at once with
// a limit-exceeded error, without queueing.
package executelimit

import (
	"context"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "executelimit"

// Activation: providers whose URL sets `executes`.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Keys: []string{kernel.KeyExecutes}}
}

// New returns the filter counting in stats, per service key and method.
func New(stats *kernel.StatusStore) extension.Filter { return &filter{stats: stats} }

type filter struct{ stats *kernel.StatusStore }

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	max := u.MethodParamInt(inv.Method, kernel.KeyExecutes, 0)
	st := f.stats.Get(u.ServiceKey(), inv.Method)
	if !st.TryBegin(max) {
		return kernel.Result{}, kernel.Errorf(kernel.CodeLimitExceeded,
			"provider %s method %s rejected the call: %d calls already running, the limit is executes=%d; retry later or raise executes",
			u.ServiceKey(), inv.Method, st.Active(), max)
	}
	start := time.Now()
	res, err := next.Invoke(ctx, inv)
	st.End(time.Since(start), err == nil)
	return res, err
}
