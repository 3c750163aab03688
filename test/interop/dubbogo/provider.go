package dubbogo

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"dubbo.apache.org/dubbo-go/v3/graceful_shutdown"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"
)

var (
	providerMu      sync.Mutex
	providerRunning bool
)

// StartProvider exports EchoService over the dubbo protocol on addr, which
// must be host:port with an explicit port (use 127.0.0.1 to stay on
// loopback). It returns once the listener is bound. Only one provider can run
// in a process at a time.
//
// stop unexports the service, closes the listener and the connections the
// provider had accepted, and closes the provider's goroutine pool, so the port
// can be bound again at once; it is idempotent. What stays is dubbo-go's
// process-global state (see the package doc).
//
// WithProviderToken makes it require Dubbo's token (dubbo-go's token filter).
func StartProvider(addr string, opts ...ProviderOption) (stop func(), err error) {
	var po providerOptions
	for _, o := range opts {
		o(&po)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dubbogo: provider address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("dubbogo: provider address %q needs an explicit port", addr)
	}
	if host == "" {
		// dubbo-go would bind all interfaces; never do that implicitly.
		return nil, fmt.Errorf("dubbogo: provider address %q needs an explicit host", addr)
	}
	setup()

	providerMu.Lock()
	defer providerMu.Unlock()
	if providerRunning {
		return nil, errors.New("dubbogo: a provider is already running in this process (dubbo-go keeps services in process-global maps)")
	}
	// A bind failure inside dubbo-go panics while it holds the dubbo protocol's
	// server lock, which would wedge the protocol for the whole process: find
	// out first.
	probe, err := net.Listen("tcp", net.JoinHostPort(host, portStr))
	if err != nil {
		return nil, fmt.Errorf("dubbogo: %w", err)
	}
	probe.Close()

	svcOpts, err := export(host, port, po)
	if err != nil {
		return nil, err
	}
	providerRunning = true
	location := net.JoinHostPort(host, portStr)
	var once sync.Once
	return func() {
		once.Do(func() {
			providerMu.Lock()
			defer providerMu.Unlock()
			svcOpts.Unexport()
			stopDubboServer(location)
			providerRunning = false
		})
	}, nil
}

// ProviderOption configures StartProvider.
type ProviderOption func(*providerOptions)

type providerOptions struct {
	token   string
	tracing bool
	zk      *zkRegistry
}

// zkRegistry is a registry for dubbo-go, interface level: ZooKeeper
// (address host:port and group, the root node: dubbo-go's registry.group;
// "" is /dubbo) or, with nacos set, Nacos (address and namespace).
type zkRegistry struct {
	address, group string
	nacos          bool
	namespace      string
}

func (z *zkRegistry) options() []registry.Option {
	kind := registry.WithZookeeper()
	if z.nacos {
		kind = registry.WithNacos()
	}
	opts := []registry.Option{
		kind,
		registry.WithAddress(z.address),
		// Interface-level registration, Dubbo 2's layout: the URL under
		// /<group>/<interface>/providers, no application-level instance
		// and no metadata report.
		registry.WithRegisterInterface(),
		registry.WithoutUseAsMetaReport(),
		registry.WithoutUseAsConfigCenter(),
		registry.WithTimeout(10 * time.Second),
	}
	if z.group != "" {
		opts = append(opts, registry.WithGroup(z.group))
	}
	if z.namespace != "" {
		opts = append(opts, registry.WithNamespace(z.namespace))
	}
	return opts
}

// WithProviderNacos registers the provider in the Nacos at address
// (host:port), namespace ns, at interface level (providers:<interface>::
// in DEFAULT_GROUP).
func WithProviderNacos(address, ns string) ProviderOption {
	return func(o *providerOptions) { o.zk = &zkRegistry{address: address, nacos: true, namespace: ns} }
}

// WithProviderZookeeper registers the provider in the ZooKeeper at address
// (host:port), under the root /group (/dubbo when group is ""), instead
// of leaving it unregistered.
func WithProviderZookeeper(address, group string) ProviderOption {
	return func(o *providerOptions) { o.zk = &zkRegistry{address: address, group: group} }
}

// WithProviderTracing turns on dubbo-go's OpenTelemetry server filter
// (otelServerTrace), as `otel.tracing.enable: true` does in a dubbo-go
// provider's config. It traces with otel's global TracerProvider and
// propagator.
func WithProviderTracing() ProviderOption {
	return func(o *providerOptions) { o.tracing = true }
}

// WithProviderToken exports the service with Dubbo's token: "true" for a
// random one, or the token itself.
func WithProviderToken(token string) ProviderOption {
	return func(o *providerOptions) { o.token = token }
}

func export(host string, port int, po providerOptions) (svcOpts *server.ServiceOptions, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbogo: dubbo-go panicked while exporting: %v", r)
		}
	}()
	opts := []server.ServerOption{
		server.WithServerProtocol(
			protocol.WithDubbo(),
			protocol.WithIp(host),
			protocol.WithPort(port),
		),
		server.WithServerSerialization("hessian2"),
		server.SetServerTLS(nil),
		server.SetServerShutdown(graceful_shutdown.NewOptions(graceful_shutdown.WithoutInternalSignal()).Shutdown),
	}
	if po.tracing {
		opts = append(opts, server.SetServerOtel(otelOn()))
	}
	if po.zk != nil {
		opts = append(opts, server.WithServerRegistry(po.zk.options()...))
	}
	srv, err := server.NewServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("dubbogo: new server: %w", err)
	}
	svc := &EchoService{}
	svcOptions := []server.ServiceOption{server.WithInterface(Interface)}
	if po.zk == nil {
		svcOptions = append(svcOptions, server.WithNotRegister())
	}
	if po.token != "" {
		svcOptions = append(svcOptions, server.WithToken(po.token))
	}
	if err := srv.Register(svc, nil, svcOptions...); err != nil {
		return nil, fmt.Errorf("dubbogo: register: %w", err)
	}
	svcOpts = srv.GetServiceOptions(svc.Reference())
	if svcOpts == nil {
		return nil, errors.New("dubbogo: registered service options not found")
	}
	// Serve would block forever in select{} and export the metadata service;
	// exporting the one service is all a direct-URL provider needs.
	if err := svcOpts.Export(); err != nil {
		return nil, fmt.Errorf("dubbogo: export: %w", err)
	}
	return svcOpts, nil
}
