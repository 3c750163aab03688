package weft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/weftrpc/weft/internal/builtin"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/plugins/filter/tracing"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Extension is one named implementation of the extension point T, as an App
// receives it: a side-effect-free constructor plus, for activatable points
// (filters), when it activates by itself.
type Extension[T any] = builtin.Ext[T]

// groupFor is the fx value group that collects the extensions of point T
// (a plugin provides an Extension[T] into it), false for a type that is no
// point. The group is named after the point's interface.
func groupFor[T any]() (string, bool) {
	var zero *T
	switch any(zero).(type) {
	case *extension.Protocol, *extension.Filter, *extension.Cluster, *extension.LoadBalance, *extension.RouterFactory,
		*extension.RegistryFactory, *extension.ServiceDiscoveryFactory, *extension.DynamicConfigurationFactory,
		*tracing.SpanExporterFactory, *extension.Serialization, *extension.ThreadPool, *extension.Merger, *extension.ClientSecurity:
		return `group:"weft.` + strings.ToLower(reflect.TypeFor[T]().Name()) + `"`, true
	}
	return "", false
}

func groupOf[T any]() string {
	g, ok := groupFor[T]()
	if !ok {
		panic("weft: no extension group for this type")
	}
	return g
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

func value[T any](v T) kernel.Factory[T] { return builtin.Value(v) }

// builtins are the extensions every App has (internal/builtin lists them);
// options may add more.
func builtins() fx.Option {
	return fx.Options(
		// dubbo and tri load their TLS material while the App is built, so
		// that a bad file fails weft.New, not the first call.
		builtinsOf[extension.Protocol](func(log *slog.Logger, cfg *Config, sl *kernel.Loader[extension.Serialization], tl *kernel.Loader[extension.ThreadPool], scl *kernel.Loader[extension.ClientSecurity]) ([]Extension[extension.Protocol], error) {
			var t *netty.TLS
			if tc := cfg.TLS.Transport(); !tc.IsZero() {
				var err error
				if t, err = netty.NewTLS(tc, log); err != nil {
					return nil, fmt.Errorf("weft: config: tls: %w", err)
				}
			}
			return builtin.Protocols(log, t, engine.NewSerializations(sl), tl.Get, scl.Get), nil
		}),
		builtinsOf[extension.ThreadPool](builtin.ThreadPools),
		builtinsOf[extension.Serialization](builtin.Serializations),
		fx.Provide(builtin.NewState), // one per App: shared by filters, balancers and metrics
		builtinsOf[extension.Filter](builtin.Filters),
		builtinsOf[extension.RouterFactory](builtin.Routers),
		builtinsOf[extension.RegistryFactory](builtin.Registries),
		builtinsOf[extension.ServiceDiscoveryFactory](builtin.Discoveries),
		builtinsOf[extension.Cluster](builtin.Clusters),
		builtinsOf[extension.LoadBalance](builtin.LoadBalances),
		fx.Provide(wasmFilters),
		metricsPlugin(),
		tracingPlugins(),
	)
}

// builtinsOf provides the extensions of point T that ctor (a function of
// the App's components returning []Extension[T]) lists.
func builtinsOf[T any](ctor any) fx.Option {
	g := groupOf[T]()
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(g[:len(g)-1]+`,flatten"`)))
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
		loader[extension.Merger]("merger", ""),           // none built in: the mergeable cluster has Java's
		loader[extension.ClientSecurity]("security", ""), // a mesh's (extension.KeySecurity)
		loader[extension.RegistryFactory]("registry", extension.DefaultRegistry),
		// Application-level discovery, by the same names as the
		// registries that have it.
		loader[extension.ServiceDiscoveryFactory]("service discovery", ""),
		// No default: a config center is used only when config names one.
		loader[extension.DynamicConfigurationFactory]("config center", ""),
		// No default either: tracing picks its exporter (config_tracing.go).
		loader[tracing.SpanExporterFactory]("span exporter", ""),
	)
}

func loader[T any](point, def string) fx.Option {
	return fx.Provide(fx.Annotate(func(exts []Extension[T], lc fx.Lifecycle) (*kernel.Loader[T], error) {
		l := kernel.NewLoader[T](point, def)
		// A name declared in config (a WASM filter) that clashes with a
		// plugin's is reported at its key path, whichever registers first.
		sources := map[string]string{}
		for _, e := range exts {
			if e.Source != "" {
				sources[e.Name] = e.Source
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
		out.Filters = append(out.Filters, Extension[extension.Filter]{Name: d.Filter.Name(), New: value[extension.Filter](d.Filter), Activate: d.Activate, Source: d.Source})
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
