package extension

import (
	"context"

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

// RouterFactory builds a Router from its URL, as Dubbo's RouterFactory does:
// the URL's protocol is the router's kind (condition, tag), its parameters
// the rule (`rule`, `force`, `priority`, ...).
type RouterFactory interface {
	GetRouter(url *kernel.URL) (Router, error)
}
