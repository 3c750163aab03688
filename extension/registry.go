package extension

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// DefaultRegistry is the embedded registry that needs no server.
const DefaultRegistry = "embedded"

// Dubbo's registration categories, in a registered URL's category
// parameter.
const (
	KeyCategory       = "category"
	CategoryProviders = "providers"
	CategoryConsumers = "consumers"
)

// IsConsumer reports whether a URL given to Register is a consumer's
// (category consumers, or Dubbo's consumer:// protocol) rather than a
// provider's.
func IsConsumer(u *kernel.URL) bool {
	return u.Param(KeyCategory) == CategoryConsumers || u.Protocol == "consumer"
}

// Registry publishes providers and tells consumers where they are.
//
// Register and Unregister get provider URLs and, for each reference that
// does not say register=false, its consumer URL (IsConsumer). A registry
// that keeps consumers (ZooKeeper's consumers node, for Dubbo Admin)
// publishes them where Dubbo does; one that does not ignores them. A
// consumer URL is never listed to subscribers.
type Registry interface {
	Register(ctx context.Context, url *kernel.URL) error
	Unregister(ctx context.Context, url *kernel.URL) error
	// Subscribe calls listener with the full list of providers matching url
	// now and after every change.
	Subscribe(ctx context.Context, url *kernel.URL, listener NotifyListener) error
	Unsubscribe(ctx context.Context, url *kernel.URL, listener NotifyListener) error
	Close() error
}

// RouterProvider is a Registry that also routes the calls of the
// references it lists providers for: a service mesh's control plane sends
// routes (which cluster of providers a call goes to, by method, header
// and weight) beside the providers. The registry layer adds the router to
// each such reference's chain; nil is no router.
type RouterProvider interface {
	Router(consumer *kernel.URL) (Router, error)
}

// NotifyListener receives full provider lists. An empty list means the
// registry has none; what to do with it is the listener's decision.
type NotifyListener interface {
	Notify(urls []*kernel.URL)
}

// RegistryFactory opens a registry from its address URL; the URL's protocol
// names the factory (`nacos://127.0.0.1:8848?namespace=dev`,
// `embedded:///var/run/weft`). An App opens one registry per configured
// address and closes it at shutdown.
type RegistryFactory interface {
	GetRegistry(url *kernel.URL) (Registry, error)
}

// Catalog is a Registry that can list what it holds, for tools (`weft ls`)
// and operators: Dubbo's Registry.lookup over every service. A registry
// that cannot list does not implement it.
type Catalog interface {
	// Providers returns the live providers the registry holds, by
	// service key, each list sorted by URL. With an error it may still
	// return what it could read (the error names what is missing).
	Providers(ctx context.Context) (map[string][]*kernel.URL, error)
}
