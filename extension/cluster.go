package extension

import (
	"context"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// Default names of the cluster-side points.
const (
	DefaultCluster     = "failover"
	DefaultLoadBalance = "random"
	// DefaultRouter is the kind of a routing rule that names none.
	DefaultRouter = "condition"
)

// Directory lists the invokers of one referred service: a fixed list from
// config, or one a registry keeps up to date.
type Directory interface {
	// URL is the consumer's URL of the reference.
	URL() *kernel.URL
	// List returns the invokers that may take inv, after routing.
	List(ctx context.Context, inv *kernel.Invocation) ([]kernel.Invoker, error)
	IsAvailable() bool
	Destroy()
}

// Cluster turns a directory of providers into one invoker with a
// fault-tolerance strategy (failover, failfast, ...).
type Cluster interface {
	Join(dir Directory) (kernel.Invoker, error)
}

// LoadBalance picks one invoker of a non-empty list. It must not block and,
// on the hot path, should not allocate.
type LoadBalance interface {
	Select(invokers []kernel.Invoker, url *kernel.URL, inv *kernel.Invocation) kernel.Invoker
}

// RoutedDirectory is a Directory whose routers can be replaced while calls
// go on: governance rules and config updates set a reference's routers
// through it. cluster's directories are ones.
type RoutedDirectory interface {
	Directory
	SetRouters(routers []Router)
}

// ConfiguredDirectory is a Directory whose providers' URLs pass through a
// configure step (Dubbo's override rules) before they are referred;
// setting another runs the last provider list through it again.
type ConfiguredDirectory interface {
	SetConfigure(configure func([]*kernel.URL) []*kernel.URL)
}

// InvokerLister is a Directory that lists every invoker it holds, before
// routing: for QoS's ls and for clusters that call them all (broadcast).
type InvokerLister interface {
	Invokers() []kernel.Invoker
}

// Merger merges the answers of a call made to several provider groups
// (Java Dubbo's Merger SPI): a reference's `merger: NAME` chooses one by
// name for the mergeable cluster. It gets two or more answers as the
// protocol decoded them, none nil, in the order of their groups' names.
// The built-in mergers (by type, Java's by name, `.method`) are the
// mergeable cluster's own; extensions add others.
type Merger interface {
	Merge(answers []any) (any, error)
}

// OutcomeObserver is a Directory that hears how each call to one of its
// invokers ended: cluster strategies tell it after every try, and its
// outlier detection ejects a provider whose calls keep failing.
type OutcomeObserver interface {
	Observe(iv kernel.Invoker, err error)
}

// Router narrows the list of invokers for one call (condition, tag, ...).
// It returns the input slice or a new one, never modifies the input.
type Router interface {
	Route(invokers []kernel.Invoker, url *kernel.URL, inv *kernel.Invocation) []kernel.Invoker
	// Priority orders routers in a chain: lower runs first.
	Priority() int
}

// CallPolicy is what a router's rules say of one call besides where it
// goes: a deadline for the whole call and how to retry it, as an xDS
// route's max_stream_duration and retry_policy do (gRFC A31, A44). The
// cluster lays it over the reference's `timeout` and `retries`.
type CallPolicy struct {
	// Timeout bounds the whole call, its retries and their backoff
	// included, and so each try; 0: the reference's `timeout` per try.
	Timeout time.Duration
	// Retry replaces the reference's `retries` and which failures are
	// retried (failover only); nil: the reference's.
	Retry *RetryPolicy
	// LoadBalance names the load balancer that picks among the call's
	// providers (an xDS cluster's lb_policy); empty: the reference's
	// `loadbalance`.
	LoadBalance string
	// Inject, when set, runs before the first try: the faults a route
	// injects (an xDS HTTPFault: a delay, bounded by ctx, then an abort).
	// end: the call ends here, with err (nil: an empty answer).
	Inject func(ctx context.Context, inv *kernel.Invocation) (end bool, err error)
	// Admit, when set, is asked before the first try: it refuses the call
	// with its error (an xDS cluster's max_requests in flight), or admits
	// it until release, which the cluster calls when the call returns.
	Admit func() (release func(), err error)
}

// RetryPolicy says which failed tries are tried again, how often, and how
// long to wait first.
type RetryPolicy struct {
	// Retries is how many tries may follow the first.
	Retries int
	// On reports whether a try that failed with err is tried again.
	On func(err error) bool
	// BackoffBase and BackoffMax are gRPC's exponential backoff: retry n
	// waits a random time below min(BackoffBase·2^(n−1), BackoffMax).
	BackoffBase, BackoffMax time.Duration
}

// PolicyRouter is a Router whose rules also set a call's CallPolicy. The
// cluster asks once per call, before the first try; the router may note on
// the invocation (an attribute) what it chose, so that Route keeps to it
// on every try, as gRPC keeps a call's route and cluster across retries.
type PolicyRouter interface {
	Router
	// CallPolicy is inv's policy; nil: none.
	CallPolicy(url *kernel.URL, inv *kernel.Invocation) *CallPolicy
}

// PolicyDirectory is a Directory whose routers may set a call's policy
// (cluster's directories are ones): the first of its PolicyRouters, in
// priority order, that has one for inv.
type PolicyDirectory interface {
	CallPolicy(inv *kernel.Invocation) *CallPolicy
}

// RouterFactory builds a Router from its URL, as Dubbo's RouterFactory does:
// the URL's protocol is the router's kind (condition, tag), its parameters
// the rule (`rule`, `force`, `priority`, ...).
type RouterFactory interface {
	GetRouter(url *kernel.URL) (Router, error)
}
