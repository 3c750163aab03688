// Package activelimit is Dubbo's ActiveLimitFilter: `actives=N` on a reference
// (or `m.actives` on one method) lets at most N calls of each method be in
// flight to each provider. A call over the limit waits for a slot, without
// polling, until its deadline and then fails with a timeout error. The
// counters are the App's StatusStore, keyed by provider URL and method, which
// the leastactive load balancer reads too.
package activelimit

import (
	"context"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "activelimit"

// Activation: consumers whose URL sets `actives`, and those whose load
// balancer reads the counters this filter keeps (Dubbo counts them in its
// always-on MonitorFilter; weft counts here, once).
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupConsumer}, Keys: []string{kernel.KeyActives,
		"loadbalance:leastactive", "loadbalance:shortestresponse", "loadbalance:p2c"}}
}

// New returns the filter counting in stats.
func New(stats *kernel.StatusStore) extension.Filter { return &filter{stats: stats} }

type filter struct{ stats *kernel.StatusStore }

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	max := u.MethodParamInt(inv.Method, kernel.KeyActives, 0)
	st := f.stats.Get(u.String(), inv.Method)
	start := time.Now()
	if !st.TryBegin(max) {
		waitCtx := ctx
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(ctx, u.MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond))
			defer cancel()
		}
		if err := st.Begin(waitCtx, max); err != nil {
			return kernel.Result{}, &kernel.Error{Code: kernel.CodeTimeout, Cause: err,
				Msg: "consumer waited " + time.Since(start).Round(time.Millisecond).String() + " for a free slot of " +
					u.Address() + " " + u.ServiceKey() + "." + inv.Method + " (actives limit reached); raise actives or timeout"}
		}
	}
	res, err := next.Invoke(ctx, inv)
	st.End(time.Since(start), err == nil)
	return res, err
}
