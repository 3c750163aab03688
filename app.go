// Package weft is the face of the framework: an App composed from config
// files, with service implementations and consumer stubs registered by name.
//
//	app, err := weft.New(
//		weft.WithConfig(weft.ConfigFiles("weft.yaml")...),
//		weft.WithService("greeter", &Greeter{}),
//		weft.WithReference("greeter", &client),
//	)
//	err = app.Start(ctx)
//	defer app.Stop(ctx)
//	reply, err := client.SayHello(ctx, "world")
//
// The App is wired with go.uber.org/fx from plugins (see Plugin); every plugin
// and every Loader belongs to one App, so two Apps in a process share nothing.
package weft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/kernel"
)

// Version is weft's version.
const Version = "0.1.0"

// Option configures an App.
type Option func(*options)

type options struct {
	sources []ConfigSource
	noEnv   bool
	log     *slog.Logger
	logFile io.Closer // the file of a logger built from config
	impls   map[string]any
	stubs   map[string][]any
	mocks   map[string]any
	plugins []fx.Option
	errs    []error
}

// WithConfig adds config sources, merged in order after those given before.
// Environment variables (WEFT_*) are merged last unless WithoutEnv is given.
func WithConfig(sources ...ConfigSource) Option {
	return func(o *options) { o.sources = append(o.sources, sources...) }
}

// WithoutEnv leaves WEFT_* environment variables out of the config.
func WithoutEnv() Option { return func(o *options) { o.noEnv = true } }

// WithLogger sets the App's logger (default: text to stderr, level info).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithService registers a service implementation under name; config exports
// it from provider.services.<id> whose `ref` (or id) is name.
func WithService(name string, impl any) Option {
	return func(o *options) {
		if _, dup := o.impls[name]; dup {
			o.errs = append(o.errs, fmt.Errorf("weft: service implementation %q registered twice", name))
		}
		o.impls[name] = impl
	}
}

// WithReference registers a consumer stub (a pointer to a struct of func
// fields, see proxy.Fill) for consumer.references.<id>.
func WithReference(id string, stub any) Option {
	return func(o *options) { o.stubs[id] = append(o.stubs[id], stub) }
}

// WithMock registers a Go fallback for `mock=true` (under the interface
// name) or `mock=NAME`: a value with the service's methods that answers when
// the providers cannot.
func WithMock(name string, impl any) Option {
	return func(o *options) { o.mocks[name] = impl }
}

// WithPlugins adds plugins (NewPlugin): their extensions join the App's
// points by name, checked when New builds the App.
func WithPlugins(ps ...Plugin) Option {
	return func(o *options) {
		for _, p := range ps {
			if err := p.check(); err != nil {
				o.errs = append(o.errs, err)
				continue
			}
			o.plugins = append(o.plugins, p.opts...)
		}
	}
}

// withFx adds fx options of the root's own to the App.
func withFx(opts ...fx.Option) Option {
	return func(o *options) { o.plugins = append(o.plugins, opts...) }
}

// WithFilter adds a filter extension; act says when it activates by itself
// (nil: only when a filter list names it).
func WithFilter(name string, act *kernel.Activate, f kernel.Factory[extension.Filter]) Option {
	return WithPlugins(NewPlugin("filter "+name, Provide(name, func(Host) (extension.Filter, error) { return f() }, act)))
}

// WithLoadBalance adds a load balancer extension.
func WithLoadBalance(name string, f kernel.Factory[extension.LoadBalance]) Option {
	return WithPlugins(NewPlugin("loadbalance "+name, Provide(name, func(Host) (extension.LoadBalance, error) { return f() }, nil)))
}

// App is a composed weft application.
type App struct {
	fx       *fx.App
	rt       *engine.Runtime
	log      *slog.Logger
	logFile  io.Closer
	closeLog sync.Once
}

// New composes an App. Every config error — unknown keys, unknown extension
// names, values out of range, missing implementations, a config with no
// services and no references — is reported here, before anything starts,
// with its key path.
func New(opts ...Option) (*App, error) {
	o := &options{impls: map[string]any{}, stubs: map[string][]any{}, mocks: map[string]any{}}
	for _, opt := range opts {
		opt(o)
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	sources := o.sources
	if !o.noEnv {
		sources = append(sources[:len(sources):len(sources)], ConfigEnv())
	}
	cfg, err := LoadConfig(sources...)
	if err != nil {
		return nil, err
	}
	cl := &closers{}
	if o.log == nil {
		log, f, err := cfg.Logger.NewLogger()
		if err != nil {
			return nil, err
		}
		o.log = log
		if f != nil {
			// Closed last, after every stop hook has logged.
			cl.add(func(context.Context) error { return f.Close() })
			o.logFile = f
		}
	}
	local := localConfig{sources: o.sources, env: !o.noEnv, cfg: cfg}
	a := &App{log: o.log, logFile: o.logFile}
	a.fx = fx.New(
		fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }),
		fx.Supply(local, &engine.Bindings{Impls: o.impls, Stubs: o.stubs, Mocks: o.mocks}, o.log, cl),
		fx.Provide(resolveConfig),
		fx.Provide(kernel.NewStatusStore),
		builtins(),
		fx.Options(o.plugins...),
		loaders(),
		fx.Provide(newRuntime),
		// Before the runtime's hook: QoS is up before the first export and
		// down after the last unexport (wiring.go).
		fx.Invoke(startQoS),
		fx.Invoke(func(lc fx.Lifecycle, rt *engine.Runtime) {
			lc.Append(fx.Hook{OnStart: rt.Start, OnStop: rt.Stop})
			a.rt = rt
		}),
	)
	if err := a.fx.Err(); err != nil {
		cl.close()
		return nil, dig.RootCause(err)
	}
	return a, nil
}

// closers collects what constructors opened (compiled WASM modules) so that
// a New failing after them releases it: fx runs stop hooks only for an App
// that started.
type closers struct{ fns []func(context.Context) error }

func (c *closers) add(f func(context.Context) error) { c.fns = append(c.fns, f) }

func (c *closers) close() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i](context.Background())
	}
}

// Config returns the App's decoded config.
func (a *App) Config() *Config { return a.rt.Config() }

// Logger returns the App's logger.
func (a *App) Logger() *slog.Logger { return a.log }

// Start exports the services, then refers the references.
func (a *App) Start(ctx context.Context) error {
	if err := a.fx.Start(ctx); err != nil {
		return dig.RootCause(err)
	}
	return nil
}

// Stop releases references, unexports services, then closes every plugin, in
// that order.
func (a *App) Stop(ctx context.Context) error {
	err := a.fx.Stop(ctx)
	if a.logFile != nil {
		a.closeLog.Do(func() { a.logFile.Close() })
	}
	return err
}

// Reference returns the invoker of a started reference, for generic calls:
//
//	res, err := inv.Invoke(ctx, kernel.NewInvocation("sayHello", "world"))
func (a *App) Reference(id string) (kernel.Invoker, error) { return a.rt.Reference(id) }

// Run starts the App, waits for SIGINT/SIGTERM or ctx, then stops it.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-sig.Done()
	return a.Stop(context.Background())
}
