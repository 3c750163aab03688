// Package builtin lists the extensions every App has, by point: the
// protocols, thread pools, serialization, filters, routers, registry,
// clusters and load balancers weft is built with. Each list is plain data
// (names, side-effect-free constructors, activations); the root package
// puts them into an App's Loaders, where plugins add theirs by the same
// names' rules.
package builtin

import (
	"log/slog"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/accesslog"
	"github.com/weftrpc/weft/plugins/filter/activelimit"
	"github.com/weftrpc/weft/plugins/filter/adaptivelb"
	"github.com/weftrpc/weft/plugins/filter/adaptivesvc"
	"github.com/weftrpc/weft/plugins/filter/circuitbreaker"
	ctxfilter "github.com/weftrpc/weft/plugins/filter/context"
	"github.com/weftrpc/weft/plugins/filter/echo"
	"github.com/weftrpc/weft/plugins/filter/exception"
	"github.com/weftrpc/weft/plugins/filter/executelimit"
	"github.com/weftrpc/weft/plugins/filter/generic"
	"github.com/weftrpc/weft/plugins/filter/timeout"
	"github.com/weftrpc/weft/plugins/filter/token"
	"github.com/weftrpc/weft/plugins/filter/tps"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/protocol/injvm"
	"github.com/weftrpc/weft/plugins/protocol/triple"
	"github.com/weftrpc/weft/plugins/registry/embedded"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/plugins/serialization/protobuf"
	"github.com/weftrpc/weft/plugins/threadpool"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Ext is one named implementation of the extension point T, as an App
// receives it: a side-effect-free constructor plus, for activatable points
// (filters), when it activates by itself.
type Ext[T any] struct {
	Name     string
	New      kernel.Factory[T]
	Activate *kernel.Activate
	// Source is the config key that declared the extension (a WASM
	// filter's wasm.filters.<name>), so that a clash of names says where;
	// empty for code's extensions.
	Source string
}

// Value is the factory of an extension that is one shared value.
func Value[T any](v T) kernel.Factory[T] { return func() (T, error) { return v, nil } }

// Protocols are injvm, and dubbo and tri over transport-netty (with t's TLS
// when not nil), which find serializations and thread pools by name.
// A provider whose URL names a ClientSecurity (a mesh's) is dialed with the
// TLS that security, found by name, gives.
func Protocols(log *slog.Logger, t *netty.TLS, sers extension.Serializations, pools func(string) (extension.ThreadPool, error),
	security func(string) (extension.ClientSecurity, error)) []Ext[extension.Protocol] {
	return []Ext[extension.Protocol]{
		{Name: injvm.Name, New: func() (extension.Protocol, error) { return injvm.New(), nil }},
		{Name: dubbo.Name, New: func() (extension.Protocol, error) {
			p := dubbo.New(log)
			if t != nil {
				p = dubbo.NewTLS(log, t)
			}
			return p.WithSerializations(sers).WithThreadPools(pools).WithSecurity(security), nil
		}},
		{Name: triple.Name, New: func() (extension.Protocol, error) {
			p := triple.New(log)
			if t != nil {
				p = triple.NewTLS(log, t)
			}
			return p.WithSerializations(sers).WithThreadPools(pools).WithSecurity(security), nil
		}},
	}
}

// ThreadPools are Dubbo's four (`threadpool` of a protocol).
func ThreadPools() []Ext[extension.ThreadPool] {
	var out []Ext[extension.ThreadPool]
	for _, name := range []string{threadpool.Fixed, threadpool.Cached, threadpool.Limited, threadpool.Eager} {
		tp, _ := threadpool.New(name)
		out = append(out, Ext[extension.ThreadPool]{Name: name, New: Value(tp)})
	}
	return out
}

// Serializations are Dubbo's default, hessian2, and protobuf (Java Dubbo's
// GenericProtobufSerialization; Triple's IDL messages); plugins add others by name
// (`serialization` on a protocol, service or reference).
func Serializations() []Ext[extension.Serialization] {
	return []Ext[extension.Serialization]{
		{Name: hessian2.Name, New: Value[extension.Serialization](hessian2.New())},
		{Name: protobuf.Name, New: Value[extension.Serialization](protobuf.New())},
	}
}

// Filters are Dubbo's built-in filters. Those with state of their own (tps
// windows, the exception filter's log limiter) are made per App.
func Filters(log *slog.Logger, st *kernel.StatusStore, s *State) []Ext[extension.Filter] {
	return []Ext[extension.Filter]{
		// Generic calls are resolved around the whole chain (the engine's
		// export, generic.Wrap); the name stays for lists that name it.
		{Name: generic.Name, New: Value(generic.New())},
		{Name: echo.Name, New: Value(echo.New()), Activate: echo.Activation()},
		{Name: token.Name, New: Value(token.New()), Activate: token.Activation()},
		{Name: tps.Name, New: func() (extension.Filter, error) { return tps.New(), nil }, Activate: tps.Activation()},
		{Name: ctxfilter.Name, New: Value(ctxfilter.New()), Activate: ctxfilter.Activation()},
		{Name: ctxfilter.ConsumerName, New: Value(ctxfilter.NewConsumer()), Activate: ctxfilter.ConsumerActivation()},
		{Name: timeout.Name, New: Value(timeout.New(log)), Activate: timeout.Activation()},
		{Name: accesslog.Name, New: func() (extension.Filter, error) { return accesslog.New(log), nil }, Activate: accesslog.Activation()},
		{Name: exception.Name, New: func() (extension.Filter, error) { return exception.New(log), nil }, Activate: exception.Activation()},
		{Name: executelimit.Name, New: Value(executelimit.New(st)), Activate: executelimit.Activation()},
		{Name: activelimit.Name, New: Value(activelimit.New(st)), Activate: activelimit.Activation()},
		{Name: circuitbreaker.Name, New: Value[extension.Filter](s.Breakers), Activate: circuitbreaker.Activation()},
		{Name: adaptivesvc.Name, New: Value[extension.Filter](s.Limiters), Activate: adaptivesvc.Activation()},
		{Name: adaptivelb.Name, New: Value(adaptivelb.New(s.Loads)), Activate: adaptivelb.Activation()},
		{Name: adaptivelb.ProviderName, New: func() (extension.Filter, error) { return adaptivelb.NewProvider(), nil }, Activate: adaptivelb.ProviderActivation()},
	}
}

// Routers are the condition and tag routers.
func Routers() []Ext[extension.RouterFactory] {
	return []Ext[extension.RouterFactory]{
		{Name: cluster.ConditionRouterName, New: Value[extension.RouterFactory](cluster.ConditionRouterFactory{})},
		{Name: cluster.TagRouterName, New: Value[extension.RouterFactory](cluster.TagRouterFactory{})},
	}
}

// Registries is the embedded registry. Nacos and ZooKeeper are not built
// in: nacos-sdk-go and the Alibaba Cloud modules it pulls cost every
// program ~10 MB of RSS at init. A program adds them with their modules'
// plugins; a config that names one without tells how (internal/optin).
func Registries(log *slog.Logger) []Ext[extension.RegistryFactory] {
	return []Ext[extension.RegistryFactory]{{Name: embedded.Name, New: Value[extension.RegistryFactory](&embedded.Factory{Log: log})}}
}

// Discoveries is the embedded registry's application-level discovery.
func Discoveries(log *slog.Logger) []Ext[extension.ServiceDiscoveryFactory] {
	return []Ext[extension.ServiceDiscoveryFactory]{{Name: embedded.Name, New: Value[extension.ServiceDiscoveryFactory](embedded.DiscoveryFactory{Log: log})}}
}

// Clusters are Dubbo's fault-tolerance strategies over the App's load
// balancers, and the mergeable cluster with the App's mergers.
func Clusters(lbs *kernel.Loader[extension.LoadBalance], mergers *kernel.Loader[extension.Merger], log *slog.Logger) []Ext[extension.Cluster] {
	var out []Ext[extension.Cluster]
	for _, c := range []struct {
		name string
		new  func(*kernel.Loader[extension.LoadBalance], *slog.Logger) extension.Cluster
	}{
		{cluster.Failover, cluster.NewFailover}, {cluster.Failfast, cluster.NewFailfast}, {cluster.Failsafe, cluster.NewFailsafe},
		{cluster.Failback, cluster.NewFailback}, {cluster.Forking, cluster.NewForking}, {cluster.Broadcast, cluster.NewBroadcast},
		{cluster.Available, cluster.NewAvailable}, {cluster.Hedging, cluster.NewHedging}, {cluster.ZoneAware, cluster.NewZoneAware},
	} {
		out = append(out, Ext[extension.Cluster]{Name: c.name, New: func() (extension.Cluster, error) { return c.new(lbs, log), nil }})
	}
	// Merges the groups of a reference of several, with the built-in
	// mergers and the plugins' (extension.Merger by name).
	return append(out, Ext[extension.Cluster]{Name: cluster.Mergeable, New: func() (extension.Cluster, error) { return cluster.NewMergeable(log, mergers), nil }})
}

// LoadBalances are Dubbo's balancers and p2c; those that read calls in
// flight read the App's status store, those that read the providers' load
// reports s.Loads.
func LoadBalances(st *kernel.StatusStore, s *State) []Ext[extension.LoadBalance] {
	return []Ext[extension.LoadBalance]{
		{Name: cluster.Random, New: Value(cluster.NewRandom())},
		{Name: cluster.RoundRobin, New: func() (extension.LoadBalance, error) { return cluster.NewRoundRobin(), nil }},
		{Name: cluster.ConsistentHash, New: func() (extension.LoadBalance, error) { return cluster.NewConsistentHash(), nil }},
		{Name: cluster.LeastActive, New: func() (extension.LoadBalance, error) { return cluster.NewLeastActive(st), nil }},
		{Name: cluster.ShortestResponse, New: func() (extension.LoadBalance, error) { return cluster.NewShortestResponse(st), nil }},
		{Name: cluster.P2C, New: func() (extension.LoadBalance, error) { return cluster.NewP2C(st, s.Loads), nil }},
		{Name: cluster.Adaptive, New: func() (extension.LoadBalance, error) { return cluster.NewAdaptive(s.Loads), nil }},
	}
}
