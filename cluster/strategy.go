package cluster

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Names of the strategies.
const (
	Failover = "failover"
	Failfast = "failfast"
)

type doInvoke func(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error)

// strategy is a Cluster whose invokers share the directory plumbing and the
// deadline; only the failure policy differs.
type strategy struct {
	lbs *kernel.Loader[extension.LoadBalance]
	do  doInvoke
}

func (s *strategy) Join(dir extension.Directory) (kernel.Invoker, error) {
	return &clusterInvoker{dir: dir, lbs: s.lbs, do: s.do}, nil
}

// NewFailover is Dubbo's default strategy: on a framework error, try another
// provider, up to `retries` (default 2) more times; each retry lists the
// providers again and skips those already tried. Business errors are returned
// at once, never retried.
func NewFailover(lbs *kernel.Loader[extension.LoadBalance]) extension.Cluster {
	return &strategy{lbs: lbs, do: failover}
}

// NewFailfast makes one attempt only: for calls that must not repeat.
func NewFailfast(lbs *kernel.Loader[extension.LoadBalance]) extension.Cluster {
	return &strategy{lbs: lbs, do: failfast}
}

type clusterInvoker struct {
	dir extension.Directory
	lbs *kernel.Loader[extension.LoadBalance]
	do  doInvoke
}

func (c *clusterInvoker) URL() *kernel.URL  { return c.dir.URL() }
func (c *clusterInvoker) IsAvailable() bool { return c.dir.IsAvailable() }
func (c *clusterInvoker) Destroy()          { c.dir.Destroy() }

func (c *clusterInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	// One deadline for the whole call, retries included.
	timeout := c.dir.URL().MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.do(ctx, c, inv)
}

func (c *clusterInvoker) list(ctx context.Context, inv *kernel.Invocation) ([]kernel.Invoker, error) {
	invokers, err := c.dir.List(ctx, inv)
	if err != nil {
		return nil, err
	}
	if len(invokers) == 0 {
		return nil, kernel.Errorf(kernel.CodeNoProvider,
			"no provider available for %s.%s; check that a provider is running and its interface, group and version match",
			c.dir.URL().ServiceKey(), inv.Method)
	}
	return invokers, nil
}

// pick selects by load balance among the invokers not tried yet, or among all
// when every one was tried (Dubbo's reselect).
func (c *clusterInvoker) pick(invokers, tried []kernel.Invoker, inv *kernel.Invocation) (kernel.Invoker, error) {
	lb, err := c.lbs.Choose(c.dir.URL(), inv.Method, kernel.KeyLoadBalance)
	if err != nil {
		return nil, err
	}
	if len(tried) > 0 {
		fresh := make([]kernel.Invoker, 0, len(invokers))
		for _, iv := range invokers {
			if !contains(tried, iv) {
				fresh = append(fresh, iv)
			}
		}
		if len(fresh) > 0 {
			invokers = fresh
		}
	}
	if len(invokers) == 1 {
		return invokers[0], nil
	}
	return lb.Select(invokers, c.dir.URL(), inv), nil
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
	return iv.Invoke(ctx, inv)
}

func failover(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := c.dir.URL()
	retries := u.MethodParamInt(inv.Method, kernel.KeyRetries, kernel.DefaultRetries)
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
		res, err := iv.Invoke(ctx, inv)
		if err == nil || kernel.IsBiz(err) {
			return res, err
		}
		last = err
	}
	addrs := make([]string, len(tried))
	for i, iv := range tried {
		addrs[i] = iv.URL().Address()
	}
	return kernel.Result{}, &kernel.Error{Code: kernel.CodeOf(last), Cause: last,
		Msg: "failover of " + u.ServiceKey() + "." + inv.Method + " gave up after " +
			strconv.Itoa(len(tried)) + " tries on [" + strings.Join(addrs, ", ") + "]"}
}
