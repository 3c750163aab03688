package cluster

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Names of the strategies, Dubbo's.
const (
	Failover  = "failover"
	Failfast  = "failfast"
	Failsafe  = "failsafe"
	Failback  = "failback"
	Forking   = "forking"
	Broadcast = "broadcast"
	Available = "available"
)

// URL parameters of the strategies, Dubbo's.
const (
	KeySticky         = "sticky"
	KeyAvailableCheck = "cluster.availablecheck"
	KeyForks          = "forks"
	KeyBroadcastFail  = "broadcast.fail.percent"
	KeyFailbackTasks  = "failbacktasks"
	KeyRetryPeriod    = "retry.period" // failback, ms
	DefaultForks      = 2
)

type doInvoke func(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error)

// strategy is a Cluster whose invokers share the directory plumbing, the
// selection rules and the deadline; only the failure policy differs.
type strategy struct {
	lbs *kernel.Loader[extension.LoadBalance]
	log *slog.Logger
	do  doInvoke
	// start, when set, gives each joined invoker per-invoker state
	// (failback's retry queue).
	start func(c *clusterInvoker)
}

func (s *strategy) Join(dir extension.Directory) (kernel.Invoker, error) {
	c := &clusterInvoker{dir: dir, lbs: s.lbs, log: s.log, do: s.do, done: make(chan struct{})}
	c.observer, _ = dir.(extension.OutcomeObserver)
	c.policies, _ = dir.(extension.PolicyDirectory)
	c.budget = newRetryBudget(dir.URL(), s.log)
	if s.start != nil {
		s.start(c)
	}
	return c, nil
}

// NewFailover is Dubbo's default strategy: on a framework error, try another
// provider, up to `retries` (default 2) more times; each retry lists the
// providers again and skips those already tried. Only failures another
// provider could answer are retried (kernel.Retryable); business errors and
// the like are returned at once. Each try has its own `timeout`.
func NewFailover(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: failover}
}

// NewFailfast makes one attempt only: for calls that must not repeat.
func NewFailfast(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: failfast}
}

// NewFailsafe makes one attempt and turns a framework failure into an empty
// result, logged: for calls whose failure must not reach the caller (audit
// logs). Business errors still come back.
func NewFailsafe(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: failsafe}
}

// NewAvailable calls the first available provider, without load balancing.
func NewAvailable(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: available}
}

// NewForking calls `forks` providers (default 2) at once and returns the
// first answer, cancelling the others: for reads where latency matters more
// than load. A business error is an answer too.
func NewForking(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: forking}
}

// NewBroadcast calls every provider in turn (cache refresh, config push);
// it fails if any fails, and stops early once `broadcast.fail.percent` of
// them (default 100) have failed.
func NewBroadcast(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: broadcast}
}

type clusterInvoker struct {
	dir    extension.Directory
	lbs    *kernel.Loader[extension.LoadBalance]
	log    *slog.Logger
	do     doInvoke
	sticky atomic.Pointer[kernel.Invoker]
	done   chan struct{}
	closed atomic.Bool
	fb     *failbackQueue
	// observer hears each try's outcome (the directory's outlier
	// detection); nil when the directory does not listen.
	observer extension.OutcomeObserver
	// policies give a call its routers' policy (an xDS route's deadline,
	// retries, faults, balancer, admission); nil for a directory that is
	// no extension.PolicyDirectory (cluster's own directories all are).
	policies extension.PolicyDirectory
	// budget caps the extra attempts (retries, forks, backups) at a share
	// of the calls; nil: no budget.
	budget *retryBudget
	lat    *latencies // hedging's observed latencies
	warned sync.Map   // settings already reported as unusable
}

func (c *clusterInvoker) URL() *kernel.URL  { return c.dir.URL() }
func (c *clusterInvoker) IsAvailable() bool { return c.dir.IsAvailable() }

func (c *clusterInvoker) Destroy() {
	if c.closed.Swap(true) {
		return
	}
	close(c.done)
	if c.fb != nil {
		c.fb.stop()
	}
	c.dir.Destroy()
}

func (c *clusterInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	if c.closed.Load() {
		return kernel.Result{}, kernel.Errorf(kernel.CodeNoProvider, "reference to %s is destroyed", c.dir.URL().ServiceKey())
	}
	c.budget.call()
	if c.policies != nil {
		if p := c.policies.CallPolicy(inv); p != nil {
			inv.SetAttribute(attrCallPolicy, p)
			if _, stream := inv.Attribute(kernel.AttrStream); p.Timeout > 0 && !stream {
				// The route's timeout bounds the whole call, retries
				// and backoff included, as gRPC's method timeout does.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, p.Timeout)
				defer cancel()
			}
			// gRPC's order: the faults (an HTTP filter) before the
			// cluster's admission (its picker).
			if p.Inject != nil {
				if end, err := p.Inject(ctx, inv); end || err != nil {
					return kernel.Result{}, err
				}
			}
			if p.Admit != nil {
				release, err := p.Admit()
				if err != nil {
					return kernel.Result{}, err
				}
				defer release()
			}
		}
	}
	return c.do(ctx, c, inv)
}

// attrCallPolicy holds a call's *extension.CallPolicy, when its routers
// set one, for the tries that follow.
const attrCallPolicy = "weft.call.policy"

// policyOf is inv's call policy; nil: none.
func policyOf(inv *kernel.Invocation) *extension.CallPolicy {
	if v, ok := inv.Attribute(attrCallPolicy); ok {
		return v.(*extension.CallPolicy)
	}
	return nil
}

// timeout is what one try of inv may take: its route's timeout when a
// router set one, else the method's `timeout`.
func (c *clusterInvoker) timeout(inv *kernel.Invocation) time.Duration {
	if p := policyOf(inv); p != nil && p.Timeout > 0 {
		return p.Timeout
	}
	return c.dir.URL().MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond)
}

// try makes one call on iv, bounded by `timeout` and by ctx. As in Dubbo,
// each try has its own timeout: a provider that hangs costs one try, not
// the whole call, so failover gets past it to a healthy one. A call is then
// bounded by (retries+1) × timeout, or earlier by the caller's deadline.
func (c *clusterInvoker) try(ctx context.Context, iv kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	if _, stream := inv.Attribute(kernel.AttrStream); stream {
		// A stream outlives this call (it returns once the stream is
		// open): its context is the caller's, and the protocol bounds the
		// whole stream by the same `timeout`.
		return iv.Invoke(ctx, inv)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout(inv))
	defer cancel()
	res, err := iv.Invoke(ctx, inv)
	if c.observer != nil {
		c.observer.Observe(iv, err)
	}
	return res, err
}

func (c *clusterInvoker) list(ctx context.Context, inv *kernel.Invocation) ([]kernel.Invoker, error) {
	invokers, err := c.dir.List(ctx, inv)
	if err != nil {
		return nil, err
	}
	if len(invokers) == 0 {
		if err := c.unreachable(inv); err != nil {
			return nil, err
		}
		// A provider the routers allow came up between the two looks
		// (a connection that reconnected): look once more.
		if invokers, err = c.dir.List(ctx, inv); err == nil && len(invokers) > 0 {
			return invokers, nil
		}
		return nil, kernel.Errorf(kernel.CodeNoProvider,
			"no provider available for %s.%s; check that a provider is running and its interface, group and version match (and what routers allow)",
			c.dir.URL().ServiceKey(), inv.Method)
	}
	return invokers, nil
}

// allRouter is a directory of this package (base) that routes all its
// invokers, available or not.
type allRouter interface {
	routeAll(*kernel.Invocation) []kernel.Invoker
}

// maxNamed bounds the providers an unreachable error names.
const maxNamed = 5

// unreachable explains an empty list whose providers are known but none can
// be connected: "no provider" is for no address known. It names the
// addresses and why each is unavailable (the dial error).
func (c *clusterInvoker) unreachable(inv *kernel.Invocation) error {
	lister, ok := c.dir.(extension.InvokerLister)
	if !ok {
		return nil
	}
	all := lister.Invokers()
	if ra, ok := c.dir.(allRouter); ok {
		// The providers the routers would send this call to, available
		// or not: those whose connections fail are the cause (a mesh's
		// route to a cluster whose providers refuse this client's
		// certificate), not the others.
		all = ra.routeAll(inv)
	}
	if len(all) == 0 {
		return nil
	}
	reasons := make([]string, 0, min(len(all), maxNamed))
	for _, iv := range all {
		if iv.IsAvailable() {
			return nil // available but routed away: not a connection problem
		}
		if len(reasons) == maxNamed {
			continue
		}
		why := "unavailable"
		if w, ok := iv.(kernel.WhyUnavailable); ok {
			if err := w.WhyUnavailable(); err != nil {
				why = err.Error()
				if ke, ok := err.(*kernel.Error); ok {
					why = ke.Text()
				}
			}
		}
		reasons = append(reasons, iv.URL().Address()+" ("+why+")")
	}
	more := ""
	if len(all) > len(reasons) {
		more = " and " + strconv.Itoa(len(all)-len(reasons)) + " more"
	}
	return &kernel.Error{Code: kernel.CodeNetwork,
		Msg: "cannot connect to any provider of " + c.dir.URL().ServiceKey() + "." + inv.Method + ": " +
			strings.Join(reasons, "; ") + more + "; check that they run and listen at these addresses (weft reconnects on its own)"}
}

// balancer is inv's load balancer: its routers' choice (an xDS cluster's
// lb_policy) when they made one, else the method's `loadbalance`.
func (c *clusterInvoker) balancer(inv *kernel.Invocation) (extension.LoadBalance, error) {
	if p := policyOf(inv); p != nil && p.LoadBalance != "" {
		return c.lbs.Get(p.LoadBalance)
	}
	return c.lbs.Choose(c.dir.URL(), inv.Method, kernel.KeyLoadBalance)
}

// pick is Dubbo's AbstractClusterInvoker.select: a sticky invoker if the
// method is sticky and it is still listed, else the load balancer's choice,
// reselected when it was already tried or (with cluster.availablecheck,
// default true) is unavailable.
func (c *clusterInvoker) pick(invokers, tried []kernel.Invoker, inv *kernel.Invocation) (kernel.Invoker, error) {
	u := c.dir.URL()
	sticky := u.MethodParamBool(inv.Method, KeySticky, false)
	check := u.ParamBool(KeyAvailableCheck, true)
	if sticky {
		if p := c.sticky.Load(); p != nil {
			s := *p
			if contains(invokers, s) && !contains(tried, s) && (!check || s.IsAvailable()) {
				return s, nil
			}
		}
	}
	iv, err := c.doSelect(invokers, tried, inv, check)
	if err == nil && sticky {
		c.sticky.Store(&iv)
	}
	return iv, err
}

func (c *clusterInvoker) doSelect(invokers, tried []kernel.Invoker, inv *kernel.Invocation, check bool) (kernel.Invoker, error) {
	if len(invokers) == 1 {
		return invokers[0], nil
	}
	lb, err := c.balancer(inv)
	if err != nil {
		return nil, err
	}
	iv := lb.Select(invokers, c.dir.URL(), inv)
	if !contains(tried, iv) && (!check || iv.IsAvailable()) {
		return iv, nil
	}
	// Reselect among the untried (available) ones, then among the tried
	// ones still available, else take the next in the list.
	fresh := make([]kernel.Invoker, 0, len(invokers))
	for _, x := range invokers {
		if !contains(tried, x) && (!check || x.IsAvailable()) {
			fresh = append(fresh, x)
		}
	}
	if len(fresh) == 0 {
		for _, x := range tried {
			if x.IsAvailable() && contains(invokers, x) {
				fresh = append(fresh, x)
			}
		}
	}
	if len(fresh) > 0 {
		return lb.Select(fresh, c.dir.URL(), inv), nil
	}
	for i, x := range invokers {
		if x == iv {
			return invokers[(i+1)%len(invokers)], nil
		}
	}
	return iv, nil
}

func contains(list []kernel.Invoker, x kernel.Invoker) bool {
	for _, iv := range list {
		if iv == x {
			return true
		}
	}
	return false
}

func failfast(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	invokers, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	iv, err := c.pick(invokers, nil, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	return c.try(ctx, iv, inv)
}

func failsafe(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	res, err := failfast(ctx, c, inv)
	if err != nil && !kernel.IsBiz(err) {
		logf(c, "failsafe: ignoring the failure of a call", inv, err)
		return kernel.Result{}, nil
	}
	return res, err
}

func available(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	invokers, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	for _, iv := range invokers {
		if iv.IsAvailable() {
			return c.try(ctx, iv, inv)
		}
	}
	return kernel.Result{}, kernel.Errorf(kernel.CodeNoProvider, "no available provider for %s.%s", c.dir.URL().ServiceKey(), inv.Method)
}

func failover(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := c.dir.URL()
	retries := u.MethodParamInt(inv.Method, kernel.KeyRetries, kernel.DefaultRetries)
	retryable := kernel.Retryable
	var rp *extension.RetryPolicy
	if p := policyOf(inv); p != nil && p.Retry != nil {
		rp = p.Retry
		retries, retryable = int64(rp.Retries), rp.On
	}
	if retries < 0 {
		retries = 0
	}
	var (
		tried []kernel.Invoker
		last  error
	)
	for attempt := int64(0); attempt <= retries; attempt++ {
		if attempt > 0 && ctx.Err() != nil {
			break
		}
		if attempt > 0 {
			if ok, why := c.budget.retry(); !ok {
				err := gaveUp(u, inv, "failover", tried, last)
				err.Msg += " (no more: " + why + ")"
				return kernel.Result{}, err
			}
			if rp != nil && !backoff(ctx, rp, attempt) {
				break
			}
		}
		invokers, err := c.list(ctx, inv)
		if err != nil {
			if last == nil {
				return kernel.Result{}, err
			}
			break
		}
		iv, err := c.pick(invokers, tried, inv)
		if err != nil {
			return kernel.Result{}, err
		}
		tried = append(tried, iv)
		res, err := c.try(ctx, iv, inv)
		if err == nil || !retryable(err) {
			// Only a failure another provider could answer is retried
			// (kernel.Retryable): a business error, a forbidden call, bad
			// arguments or an unknown method would fail there too.
			if err != nil && attempt > 0 && !kernel.IsBiz(err) {
				return res, gaveUp(u, inv, "failover", tried, err)
			}
			return res, err
		}
		last = err
	}
	return kernel.Result{}, gaveUp(u, inv, "failover", tried, last)
}

// backoff waits before retry n of a call whose route has a retry policy,
// as gRPC does: a random time below min(base·2^(n−1), max). It reports
// false when the call's deadline comes first.
func backoff(ctx context.Context, rp *extension.RetryPolicy, n int64) bool {
	limit := rp.BackoffBase << min(n-1, 30)
	if limit <= 0 || limit > rp.BackoffMax {
		limit = rp.BackoffMax
	}
	if limit <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(rand.N(limit))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func gaveUp(u *kernel.URL, inv *kernel.Invocation, how string, tried []kernel.Invoker, last error) *kernel.Error {
	addrs := make([]string, len(tried))
	for i, iv := range tried {
		addrs[i] = iv.URL().Address()
	}
	return &kernel.Error{Code: kernel.CodeOf(last), Cause: last,
		Msg: how + " of " + u.ServiceKey() + "." + inv.Method + " gave up after " +
			strconv.Itoa(len(tried)) + " tries on [" + strings.Join(addrs, ", ") + "]"}
}

type answer struct {
	res kernel.Result
	err error
}

func forking(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	invokers, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	forks := int(c.dir.URL().MethodParamInt(inv.Method, KeyForks, DefaultForks))
	selected := invokers
	if n := len(invokers); (forks > 0 && forks < n) || c.budget != nil {
		if forks > 0 {
			n = min(n, forks)
		}
		selected = make([]kernel.Invoker, 0, n)
		for len(selected) < n {
			if len(selected) > 0 {
				if ok, _ := c.budget.retry(); !ok {
					break // the extra forks are what the budget caps
				}
			}
			iv, err := c.pick(invokers, selected, inv)
			if err != nil {
				return kernel.Result{}, err
			}
			if contains(selected, iv) {
				break
			}
			selected = append(selected, iv)
		}
	}
	// The forks run at once, so they share one timeout.
	ctx, cancel := context.WithTimeout(ctx, c.timeout(inv))
	defer cancel() // the slower forks stop here
	answers := make(chan answer, len(selected))
	for _, iv := range selected {
		go func() {
			res, err := iv.Invoke(ctx, inv.Clone())
			if c.observer != nil {
				c.observer.Observe(iv, err) // a fork canceled as slower is not counted
			}
			answers <- answer{res, err}
		}()
	}
	var last error
	for range selected {
		select {
		case a := <-answers:
			if a.err == nil || !kernel.Retryable(a.err) {
				// An answer every provider would give is an answer.
				return a.res, a.err
			}
			last = a.err
		case <-ctx.Done():
			return kernel.Result{}, kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "forking call of %s.%s: no answer from %d providers in time",
				c.dir.URL().ServiceKey(), inv.Method, len(selected))
		}
	}
	return kernel.Result{}, gaveUp(c.dir.URL(), inv, "forking", selected, last)
}

func broadcast(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	invokers, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	percent := c.dir.URL().MethodParamInt(inv.Method, KeyBroadcastFail, 100)
	if percent < 0 || percent > 100 {
		percent = 100
	}
	limit := int(float64(len(invokers)) * float64(percent) / 100)
	var (
		res    kernel.Result
		failed int
		last   error
	)
	for _, iv := range invokers {
		r, err := c.try(ctx, iv, inv.Clone())
		if err != nil {
			failed++
			last = err
			logf(c, "broadcast: a provider failed", inv, err)
			if failed >= max(limit, 1) && percent < 100 {
				break
			}
			continue
		}
		res = r
	}
	if last != nil {
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeOf(last), Cause: last,
			Msg: "broadcast of " + c.dir.URL().ServiceKey() + "." + inv.Method + ": " + strconv.Itoa(failed) + " of " + strconv.Itoa(len(invokers)) + " providers failed"}
	}
	return res, nil
}

func logf(c *clusterInvoker, msg string, inv *kernel.Invocation, err error) {
	c.log.Warn("weft: "+msg, "service", c.dir.URL().ServiceKey(), "method", inv.Method, "err", err)
}
