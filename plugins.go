package weft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/plugins/threadpool"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/accesslog"
	"github.com/weftrpc/weft/plugins/filter/activelimit"
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
	netty "github.com/weftrpc/weft/transport-netty"
)

// Extension is one named implementation of the extension point T, as an App
// receives it: a side-effect-free constructor plus, for activatable points
// (filters), when it activates by itself.
type Extension[T any] struct {
	Name     string
	New      kernel.Factory[T]
	Activate *kernel.Activate

	// source is the config key that declared the extension (a WASM
	// filter's wasm.filters.<name>), so that a clash of names says where.
	source string
}

// The fx value groups that collect each point's extensions. A plugin is an
// fx.Option that provides an Extension[T] into its group.
const (
	groupProtocol      = `group:"weft.protocol"`
	groupFilter        = `group:"weft.filter"`
	groupCluster       = `group:"weft.cluster"`
	groupLoadBalance   = `group:"weft.loadbalance"`
	groupRouter        = `group:"weft.router"`
	groupRegistry      = `group:"weft.registry"`
	groupDiscovery     = `group:"weft.servicediscovery"`
	groupConfig        = `group:"weft.configcenter"`
	groupSpanExport    = `group:"weft.spanexporter"`
	groupSerialization = `group:"weft.serialization"`
	groupThreadPool    = `group:"weft.threadpool"`
)

func groupOf[T any]() string {
	g, ok := groupFor[T]()
	if !ok {
		panic("weft: no extension group for this type")
	}
	return g
}

// groupFor is the value group of point T, false for a type that is none.
func groupFor[T any]() (string, bool) {
	var zero *T
	switch any(zero).(type) {
	case *extension.Protocol:
		return groupProtocol, true
	case *extension.Filter:
		return groupFilter, true
	case *extension.Cluster:
		return groupCluster, true
	case *extension.LoadBalance:
		return groupLoadBalance, true
	case *extension.RouterFactory:
		return groupRouter, true
	case *extension.RegistryFactory:
		return groupRegistry, true
	case *extension.ServiceDiscoveryFactory:
		return groupDiscovery, true
	case *extension.DynamicConfigurationFactory:
		return groupConfig, true
	case *extension.SpanExporterFactory:
		return groupSpanExport, true
	case *extension.Serialization:
		return groupSerialization, true
	case *extension.ThreadPool:
		return groupThreadPool, true
	}
	return "", false
}

// plugin turns ctor, a function (taking any of the App's components: a
// *slog.Logger, the *kernel.StatusStore, another point's Loader) that
// returns an Extension[T], into an fx option of an App: the built-ins'
// wiring. Programs and modules add theirs as Plugins (NewPlugin).
func plugin[T any](ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(groupOf[T]())))
}

// A Plugin is extensions a program adds to its Apps (WithPlugins): a
// registry, a serialization, a span exporter, a filter. It is a plain
// value: nothing of it runs until New builds an App, which checks its
// points and names and reports a bad one naming the plugin.
type Plugin struct {
	name string
	opts []fx.Option
	errs []error
}

// PluginExtension is one extension of a Plugin, made by Provide.
type PluginExtension struct {
	opt fx.Option
	err error
}

// Host is what an extension's constructor gets from the App it joins.
type Host struct {
	// Log is the App's logger.
	Log *slog.Logger
	// Status is the App's count of calls in flight per service and
	// method (the actives and executes limits read it).
	Status *kernel.StatusStore
}

// NewPlugin returns the plugin name made of exts.
func NewPlugin(name string, exts ...PluginExtension) Plugin {
	p := Plugin{name: name}
	for _, e := range exts {
		if e.err != nil {
			p.errs = append(p.errs, e.err)
			continue
		}
		p.opts = append(p.opts, e.opt)
	}
	return p
}

func (p Plugin) check() error {
	if p.name == "" && len(p.opts)+len(p.errs) > 0 {
		p.name = "(unnamed)"
	}
	if len(p.errs) > 0 {
		return fmt.Errorf("weft: plugin %s: %w", p.name, errors.Join(p.errs...))
	}
	return nil
}

// Provide is the extension name of point T (extension.RegistryFactory,
// extension.Serialization, extension.Filter, ...), which ctor makes, once,
// with the Host of the App that first uses it; act (filters) says when it
// activates by itself, nil when only a list names it. A T that is no
// extension point, or an empty name, makes the plugin fail New.
func Provide[T any](name string, ctor func(h Host) (T, error), act *kernel.Activate) PluginExtension {
	group, ok := groupFor[T]()
	switch {
	case !ok:
		return PluginExtension{err: fmt.Errorf("extension %q: %s is not an extension point of weft", name, reflect.TypeFor[T]())}
	case name == "":
		return PluginExtension{err: fmt.Errorf("an extension of %s without a name", reflect.TypeFor[T]())}
	case ctor == nil:
		return PluginExtension{err: fmt.Errorf("extension %q: no constructor", name)}
	}
	return PluginExtension{opt: fx.Provide(fx.Annotate(func(log *slog.Logger, st *kernel.StatusStore) Extension[T] {
		h := Host{Log: log, Status: st}
		return Extension[T]{Name: name, New: func() (T, error) { return ctor(h) }, Activate: act}
	}, fx.ResultTags(group)))}
}

func value[T any](v T) kernel.Factory[T] { return func() (T, error) { return v, nil } }

// builtins are the plugins every App has; options may add more.
func builtins() fx.Option {
	return fx.Options(
		plugin[extension.Protocol](func() Extension[extension.Protocol] {
			return Extension[extension.Protocol]{Name: injvm.Name, New: func() (extension.Protocol, error) { return injvm.New(), nil }}
		}),

		// dubbo and tri over transport-netty, with TLS when config has it.
		netProtocolPlugin(dubbo.Name, func(log *slog.Logger, t *netty.TLS, sers extension.Serializations, pools func(string) (extension.ThreadPool, error)) extension.Protocol {
			p := dubbo.New(log)
			if t != nil {
				p = dubbo.NewTLS(log, t)
			}
			return p.WithSerializations(sers).WithThreadPools(pools)
		}),
		netProtocolPlugin(triple.Name, func(log *slog.Logger, t *netty.TLS, sers extension.Serializations, pools func(string) (extension.ThreadPool, error)) extension.Protocol {
			p := triple.New(log)
			if t != nil {
				p = triple.NewTLS(log, t)
			}
			return p.WithSerializations(sers).WithThreadPools(pools)
		}),
		// Dubbo's four thread pools (`threadpool` of a protocol).
		threadPoolPlugin(threadpool.Fixed),
		threadPoolPlugin(threadpool.Cached),
		threadPoolPlugin(threadpool.Limited),
		threadPoolPlugin(threadpool.Eager),
		// Dubbo's default serialization; plugins add others by name
		// (`serialization` on a protocol, service or reference).
		plugin[extension.Serialization](func() Extension[extension.Serialization] {
			return Extension[extension.Serialization]{Name: hessian2.Name, New: value[extension.Serialization](hessian2.New())}
		}),

		plugin[extension.Filter](func() Extension[extension.Filter] {
			// Generic calls are resolved around the whole chain (runtime's
			// export, generic.Wrap); the name stays for lists that name it.
			return Extension[extension.Filter]{Name: generic.Name, New: value(generic.New())}
		}),
		plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: echo.Name, New: value(echo.New()), Activate: echo.Activation()}
		}),
		plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: token.Name, New: value(token.New()), Activate: token.Activation()}
		}),
		plugin[extension.Filter](func() Extension[extension.Filter] {
			// New per App: its windows are the App's.
			return Extension[extension.Filter]{Name: tps.Name, New: func() (extension.Filter, error) { return tps.New(), nil }, Activate: tps.Activation()}
		}),
		plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: ctxfilter.Name, New: value(ctxfilter.New()), Activate: ctxfilter.Activation()}
		}),
		plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: ctxfilter.ConsumerName, New: value(ctxfilter.NewConsumer()), Activate: ctxfilter.ConsumerActivation()}
		}),
		plugin[extension.Filter](func(log *slog.Logger) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: timeout.Name, New: value(timeout.New(log)), Activate: timeout.Activation()}
		}),
		plugin[extension.Filter](func(log *slog.Logger) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: accesslog.Name, Activate: accesslog.Activation(),
				New: func() (extension.Filter, error) { return accesslog.New(log), nil }}
		}),
		plugin[extension.Filter](func(log *slog.Logger) Extension[extension.Filter] {
			// New per App: its log limiter is the App's.
			return Extension[extension.Filter]{Name: exception.Name, Activate: exception.Activation(),
				New: func() (extension.Filter, error) { return exception.New(log), nil }}
		}),
		plugin[extension.Filter](func(st *kernel.StatusStore) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: executelimit.Name, New: value(executelimit.New(st)), Activate: executelimit.Activation()}
		}),
		plugin[extension.Filter](func(st *kernel.StatusStore) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: activelimit.Name, New: value(activelimit.New(st)), Activate: activelimit.Activation()}
		}),

		plugin[extension.RouterFactory](func() Extension[extension.RouterFactory] {
			return Extension[extension.RouterFactory]{Name: cluster.ConditionRouterName, New: value[extension.RouterFactory](cluster.ConditionRouterFactory{})}
		}),
		plugin[extension.RouterFactory](func() Extension[extension.RouterFactory] {
			return Extension[extension.RouterFactory]{Name: cluster.TagRouterName, New: value[extension.RouterFactory](cluster.TagRouterFactory{})}
		}),

		fx.Provide(wasmFilters),
		metricsPlugin(),

		tracingPlugins(),

		plugin[extension.RegistryFactory](func(log *slog.Logger) Extension[extension.RegistryFactory] {
			return Extension[extension.RegistryFactory]{Name: embedded.Name, New: value[extension.RegistryFactory](&embedded.Factory{Log: log})}
		}),
		plugin[extension.ServiceDiscoveryFactory](func(log *slog.Logger) Extension[extension.ServiceDiscoveryFactory] {
			return Extension[extension.ServiceDiscoveryFactory]{Name: embedded.Name, New: value[extension.ServiceDiscoveryFactory](embedded.DiscoveryFactory{Log: log})}
		}),

		// Nacos (registry and config center) is not built in: nacos-sdk-go
		// and the Alibaba Cloud modules it pulls cost every program ~10 MB
		// of RSS at init. A program adds it with nacos.Plugin() of
		// registry-nacos; a config that names it without tells how
		// (optin.go).

		clusterPlugin(cluster.Failover, cluster.NewFailover),
		clusterPlugin(cluster.Failfast, cluster.NewFailfast),
		clusterPlugin(cluster.Failsafe, cluster.NewFailsafe),
		clusterPlugin(cluster.Failback, cluster.NewFailback),
		clusterPlugin(cluster.Forking, cluster.NewForking),
		clusterPlugin(cluster.Broadcast, cluster.NewBroadcast),
		clusterPlugin(cluster.Available, cluster.NewAvailable),
		plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.Random, New: value(cluster.NewRandom())}
		}),
		plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.RoundRobin, New: func() (extension.LoadBalance, error) { return cluster.NewRoundRobin(), nil }}
		}),
		plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.ConsistentHash, New: func() (extension.LoadBalance, error) { return cluster.NewConsistentHash(), nil }}
		}),
		plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.LeastActive, New: func() (extension.LoadBalance, error) { return cluster.NewLeastActive(st), nil }}
		}),
		plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.ShortestResponse, New: func() (extension.LoadBalance, error) { return cluster.NewShortestResponse(st), nil }}
		}),
		plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.P2C, New: func() (extension.LoadBalance, error) { return cluster.NewP2C(st), nil }}
		}),
	)
}

// netProtocolPlugin is a protocol on transport-netty: its TLS material
// loads while the App is built, so that a bad file fails weft.New, not the
// first call; it finds serializations and thread pools by name in the
// App's Loaders.
func netProtocolPlugin(name string, ctor func(log *slog.Logger, t *netty.TLS, sers extension.Serializations, pools func(string) (extension.ThreadPool, error)) extension.Protocol) fx.Option {
	return plugin[extension.Protocol](func(log *slog.Logger, cfg *Config, sl *kernel.Loader[extension.Serialization], tl *kernel.Loader[extension.ThreadPool]) (Extension[extension.Protocol], error) {
		var t *netty.TLS
		if !cfg.TLS.Transport().IsZero() {
			var err error
			if t, err = netty.NewTLS(cfg.TLS.Transport(), log); err != nil {
				return Extension[extension.Protocol]{}, fmt.Errorf("weft: config: tls: %w", err)
			}
		}
		sers := engine.NewSerializations(sl)
		return Extension[extension.Protocol]{Name: name, New: func() (extension.Protocol, error) { return ctor(log, t, sers, tl.Get), nil }}, nil
	})
}

func threadPoolPlugin(name string) fx.Option {
	return plugin[extension.ThreadPool](func() Extension[extension.ThreadPool] {
		tp, _ := threadpool.New(name)
		return Extension[extension.ThreadPool]{Name: name, New: value(tp)}
	})
}

func clusterPlugin(name string, ctor func(*kernel.Loader[extension.LoadBalance], *slog.Logger) extension.Cluster) fx.Option {
	return plugin[extension.Cluster](func(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) Extension[extension.Cluster] {
		return Extension[extension.Cluster]{Name: name, New: func() (extension.Cluster, error) { return ctor(lbs, log), nil }}
	})
}

// loaders builds one Loader per point from its group. Each Loader closes its
// instances when the App stops, after everything that uses them.
func loaders() fx.Option {
	return fx.Options(
		loader[extension.Protocol]("protocol", extension.DefaultProtocol),
		loader[extension.Serialization]("serialization", extension.DefaultSerialization),
		loader[extension.ThreadPool]("threadpool", extension.DefaultThreadPool),
		loader[extension.Filter]("filter", extension.DefaultFilter),
		loader[extension.Cluster]("cluster", extension.DefaultCluster),
		loader[extension.LoadBalance]("loadbalance", extension.DefaultLoadBalance),
		loader[extension.RouterFactory]("router", extension.DefaultRouter),
		loader[extension.RegistryFactory]("registry", extension.DefaultRegistry),
		// Application-level discovery, by the same names as the
		// registries that have it.
		loader[extension.ServiceDiscoveryFactory]("service discovery", ""),
		// No default: a config center is used only when config names one.
		loader[extension.DynamicConfigurationFactory]("config center", ""),
		// No default either: tracing picks its exporter (config_tracing.go).
		loader[extension.SpanExporterFactory]("span exporter", ""),
	)
}

func loader[T any](point, def string) fx.Option {
	return fx.Provide(fx.Annotate(func(exts []Extension[T], lc fx.Lifecycle) (*kernel.Loader[T], error) {
		l := kernel.NewLoader[T](point, def)
		// A name declared in config (a WASM filter) that clashes with a
		// plugin's is reported at its key path, whichever registers first.
		sources := map[string]string{}
		for _, e := range exts {
			if e.source != "" {
				sources[e.Name] = e.source
			}
		}
		for _, e := range exts {
			if err := l.Register(e.Name, e.New, e.Activate); err != nil {
				if src := sources[e.Name]; src != "" {
					err = fmt.Errorf("weft: config: %s: %w", src, err)
				}
				return nil, err
			}
		}
		lc.Append(fx.StopHook(l.Close))
		return l, nil
	}, fx.ParamTags(groupOf[T]())))
}

// wasmFilters makes a Filter extension of each wasm.filters.<name>, into the
// same group (and so the same Loader and activation) as native filters,
// compiled and checked at New (wasmfilter.Settings.Build); they watch their
// files while the App runs.
func wasmFilters(cfg *Config, log *slog.Logger, lc fx.Lifecycle, cl *closers) (wasmOut, error) {
	declared, err := cfg.Wasm.Build(context.Background(), log)
	if err != nil {
		return wasmOut{}, fmt.Errorf("weft: config: %w", err)
	}
	if len(declared) == 0 {
		return wasmOut{}, nil
	}
	out := wasmOut{Set: engine.WasmSet{}}
	for _, d := range declared {
		out.Filters = append(out.Filters, Extension[extension.Filter]{Name: d.Filter.Name(), New: value[extension.Filter](d.Filter), Activate: d.Activate, source: d.Source})
		out.Set[d.Filter.Name()] = d.Filter
	}
	closeAll := func(context.Context) error {
		var errs []error
		for _, d := range declared {
			errs = append(errs, d.Filter.Close())
		}
		return errors.Join(errs...)
	}
	cl.add(closeAll)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			for _, d := range declared {
				d.Filter.Watch(wasmfilter.DefaultWatchInterval)
			}
			return nil
		},
		// Runs after the runtime's stop (hooks stop in reverse): no call is
		// left in flight.
		OnStop: closeAll,
	})
	return out, nil
}

// wasmOut puts the WASM filters into the filter group, and the set of them
// where config changes find them.
type wasmOut struct {
	fx.Out
	Filters []Extension[extension.Filter] `group:"weft.filter,flatten"`
	Set     engine.WasmSet
}
