package extension

import (
	"context"
	"net"
	"strconv"

	"github.com/weftrpc/weft/kernel"
)

// ServiceInstance is one running instance of an application, as Dubbo 3's
// application-level service discovery registers it: the application's
// name, the address of the instance, and metadata that says which protocol
// listens on which port (dubbo.endpoints), which revision of the
// application's service list it serves (dubbo.metadata.revision) and where
// its MetadataService answers (dubbo.metadata-service.url-params).
type ServiceInstance struct {
	App  string
	Host string
	Port int
	// Metadata is the instance's key/value metadata; Dubbo's keys are in
	// package registry.
	Metadata map[string]string
}

// ID is Dubbo's instance id, host:port.
func (s ServiceInstance) ID() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// InstanceListener receives the full list of an application's instances,
// at subscribe time and after every change. An empty list means the
// discovery has none.
type InstanceListener interface {
	NotifyInstances(app string, instances []ServiceInstance)
}

// ServiceDiscovery is application-level service discovery (Dubbo 3's
// ServiceDiscovery plus its service-name mapping): instances registered by
// application name, and the mapping from each interface to the
// applications that provide it, which a consumer reads to know which
// applications to watch. A registry plugin that supports it provides a
// ServiceDiscoveryFactory under the same name as its RegistryFactory.
type ServiceDiscovery interface {
	// Register publishes the instance, or replaces its metadata when it
	// is registered already (its revision changed).
	Register(ctx context.Context, in ServiceInstance) error
	Unregister(ctx context.Context, in ServiceInstance) error
	// Subscribe calls l with app's instances now and after every change.
	Subscribe(ctx context.Context, app string, l InstanceListener) error
	Unsubscribe(ctx context.Context, app string, l InstanceListener) error
	// Mapping returns the applications that provide the interface (none:
	// an empty list and no error).
	Mapping(ctx context.Context, iface string) ([]string, error)
	// AddMapping records that app provides the interface, keeping the
	// other applications already mapped.
	AddMapping(ctx context.Context, iface, app string) error
	Close() error
}

// ServiceDiscoveryFactory opens a ServiceDiscovery from a registry's
// address URL (the same URL its RegistryFactory gets).
type ServiceDiscoveryFactory interface {
	GetServiceDiscovery(url *kernel.URL) (ServiceDiscovery, error)
}
