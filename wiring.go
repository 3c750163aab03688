package weft

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/configcenter"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/internal/observe"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/qos"
)

// The engine's parts as fx wires them: the config (with its config
// center), the runtime, the QoS server.

// localConfig is what New read before any config center: the sources in
// order (files, in-memory YAML) and whether WEFT_* variables go on top.
type localConfig struct {
	sources []ConfigSource
	env     bool
	cfg     *Config
}

// merge composes the App's config from the local sources and a config
// center's document: files, then the document, then WEFT_* variables (an
// operator's override beats the config center, as a flag would). The
// document is checked alone first so that its errors name it.
func (l localConfig) merge(content string) (*Config, error) {
	doc := yamlSource(content)
	alone, err := LoadConfig(doc)
	if err != nil {
		return nil, err
	}
	if alone.ConfigCenter != (ConfigCenterConfig{}) {
		return nil, errors.New("config_center cannot be set from the config center itself")
	}
	sources := append(append([]ConfigSource(nil), l.sources...), doc)
	if l.env {
		sources = append(sources, ConfigEnv())
	}
	return LoadConfig(sources...)
}

// resolveConfig is the App's *Config: the local one, or, with a
// config_center, the local one merged with the document read now. The
// config center stays open, closed after everything else (or by New if a
// later part fails to build), so that the runtime can watch the document.
func resolveConfig(local localConfig, factories *kernel.Loader[extension.DynamicConfigurationFactory],
	log *slog.Logger, lc fx.Lifecycle, cl *closers) (*Config, *configcenter.Center, error) {
	cfg, cc, err := configcenter.Open(local.cfg, local.merge, factories, log)
	if err == nil && cc != nil {
		lc.Append(fx.StopHook(cc.Close))
		cl.add(func(context.Context) error { return cc.Close() })
	}
	return cfg, cc, err
}

type runtimeIn struct {
	fx.In
	Config         *Config
	Bindings       *engine.Bindings
	Log            *slog.Logger
	Protocols      *kernel.Loader[extension.Protocol]
	Filters        *kernel.Loader[extension.Filter]
	Clusters       *kernel.Loader[extension.Cluster]
	LoadBalances   *kernel.Loader[extension.LoadBalance]
	Routers        *kernel.Loader[extension.RouterFactory]
	Registries     *kernel.Loader[extension.RegistryFactory]
	Discoveries    *kernel.Loader[extension.ServiceDiscoveryFactory]
	Serializations *kernel.Loader[extension.Serialization]
	ThreadPools    *kernel.Loader[extension.ThreadPool]
	Mergers        *kernel.Loader[extension.Merger]
	Center         *configcenter.Center
	Wasm           engine.WasmSet
	Observer       *observe.Observer
}

func newRuntime(in runtimeIn) (*engine.Runtime, error) {
	return engine.New(engine.Deps{Config: in.Config, Bindings: in.Bindings, Log: in.Log,
		Protocols: in.Protocols, Filters: in.Filters, Clusters: in.Clusters, LoadBalances: in.LoadBalances,
		Routers: in.Routers, Registries: in.Registries, Discoveries: in.Discoveries,
		Serializations: in.Serializations, ThreadPools: in.ThreadPools, Mergers: in.Mergers,
		Center: in.Center, Wasm: in.Wasm, Observer: in.Observer})
}

type qosIn struct {
	fx.In
	LC  fx.Lifecycle
	RT  *engine.Runtime
	Log *slog.Logger
}

// startQoS adds the QoS server to the App's life. New invokes it before the
// runtime's hook, so fx starts it before anything is exported (the probes
// answer "not ready" while the App starts) and stops it after everything
// is unexported (they answer "not ready" while it stops).
func startQoS(in qosIn) {
	cfg, rt := in.RT.Config().QoS, in.RT
	if !cfg.Enabled() {
		return
	}
	in.LC.Append(fx.Hook{
		OnStart: func(context.Context) error {
			// /metrics is the App's own registry; with metrics off the
			// QoS server answers it with 404 "metrics disabled".
			var mh http.Handler
			if obs := rt.Observer(); obs != nil && obs.Metrics != nil {
				mh = obs.Metrics.Handler()
			}
			srv, err := qos.Listen(qos.Config{Addr: cfg.Addr(), App: rt.QoS(), Metrics: mh, Log: in.Log})
			if err != nil {
				// Dubbo logs "qos-server can not bind" and starts anyway: a
				// second App on one host must not fail for want of it.
				in.Log.Warn("weft: qos: cannot listen; the App runs without its QoS port (no probes, online, offline or /metrics)",
					"addr", cfg.Addr(), "err", err, "fix", "set qos.port to a free port (0: any), or qos.enable: false")
				return nil
			}
			rt.SetQoSServer(srv)
			in.Log.Info("weft: qos listening", "addr", srv.Addr(), "accept_foreign_ip", cfg.AcceptForeignIP)
			return nil
		},
		OnStop: func(context.Context) error {
			if srv := rt.SetQoSServer(nil); srv != nil {
				return srv.Close()
			}
			return nil
		},
	})
}

// QoSAddr is the address the App's QoS server listens on (with the port it
// got when qos.port is 0), or "" when it is disabled, could not bind, or
// the App is not running.
func (a *App) QoSAddr() string {
	if srv := a.rt.QoSServer(); srv != nil {
		return srv.Addr()
	}
	return ""
}
