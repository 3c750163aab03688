package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/internal/configcenter"
	"github.com/weftrpc/weft/internal/observe"
	"github.com/weftrpc/weft/internal/optin"
	"github.com/weftrpc/weft/plugins/threadpool"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	gov "github.com/weftrpc/weft/governance"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/generic"
	"github.com/weftrpc/weft/plugins/filter/metrics"
	"github.com/weftrpc/weft/plugins/filter/token"
	"github.com/weftrpc/weft/plugins/filter/tps"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/proxy/idl"
	"github.com/weftrpc/weft/qos"
	"github.com/weftrpc/weft/registry"
)

// Runtime is what one App exports and refers, built from its Config and its
// Loaders. The config is checked entirely in New, before anything starts.
type Runtime struct {
	cfg       *config.Config
	log       *slog.Logger
	protocols *kernel.Loader[extension.Protocol]
	filters   *kernel.Loader[extension.Filter]
	clusters  *kernel.Loader[extension.Cluster]
	lbs       *kernel.Loader[extension.LoadBalance]
	routers   *kernel.Loader[extension.RouterFactory]
	regs      *kernel.Loader[extension.RegistryFactory]
	sds       *kernel.Loader[extension.ServiceDiscoveryFactory]
	mergers   *kernel.Loader[extension.Merger]

	registryURLs map[string]*kernel.URL // id -> address
	// layer is the registries and what is registered and subscribed in
	// them (package registry), open from start to stop.
	layer *registry.Layer
	// metaURL is where the App's MetadataService answers, once exported.
	metaURL atomic.Pointer[kernel.URL]
	// exported is each export's published URL (ls, ps), guarded by regMu;
	// callable each service's chain as its exporter calls it (generic
	// calls resolved first), QoS invoke's way in, by service id.
	exported []exportedURL
	callable map[string]kernel.Invoker
	regMu    sync.Mutex
	// life is the App's life as QoS's probes see it (qos_app.go).
	life lifeState

	services []*service
	gateways []*gateway
	// wasmServices are the modules of services implemented in WASM:
	// watched from start, closed at stop (or when New fails).
	wasmServices []*wasmfilter.Filter
	// forwards are the targets of services that forward (impl.forward), by
	// service id: a config center may point one at another reference.
	forwards map[string]*atomic.Pointer[string]
	refs     map[string]*reference
	refIDs   []string

	exporters []extension.Exporter

	reg *Bindings
	// With a config center, what a changed document may replace while
	// the App runs (see dynamic.go); all nil/empty without one.
	cc      *configcenter.Center
	wasm    WasmSet
	chains  []*serviceChain
	applyMu sync.Mutex // serialises applies, Config() and stop
	stopped bool
	stopCh  chan struct{}
	drains  sync.WaitGroup
	obs     *observe.Observer // life events for metrics (metrics_plugin.go)
}

type exportedURL struct {
	service string
	url     *kernel.URL // with the port the server got
}

type service struct {
	id       string
	register bool          // Dubbo's register: false exports without registering
	delay    time.Duration // Dubbo's delay: registered that long after start
	impl     any
	urls     []*kernel.URL // one per protocol
	invokers []innerInvoker
}

type reference struct {
	routers  []extension.Router
	discover bool // providers come from the registries
	// registryRouted: the registries' routers (a mesh's) are in routers.
	registryRouted bool
	check          bool // Dubbo's check: start only with a provider available
	id             string
	url            *kernel.URL   // consumer URL
	targets        []*kernel.URL // providers to refer (merged with consumer params)
	stubs          []any
	invoker        atomic.Pointer[kernel.Invoker]

	// Set by refer: where new routers go, and the registries'
	// subscription that feeds the directory of a discovering reference.
	dir extension.RoutedDirectory
	sub *registry.Subscription
	// joined is the cluster's invoker, before the cluster filters: the
	// metrics read its retry budget.
	joined kernel.Invoker
	// gov applies Dubbo Admin's rules from the config center; nil
	// without one.
	gov *gov.Rules
}

func (r *reference) current() (kernel.Invoker, error) {
	p := r.invoker.Load()
	if p == nil {
		return nil, kernel.Errorf(kernel.CodeNoProvider, "reference %q is not referred: start the App first (or it has stopped)", r.id)
	}
	return *p, nil
}

// Bindings are the Go values an App was given: implementations, stubs and
// mock fallbacks, by id.
type Bindings struct {
	Impls map[string]any
	Stubs map[string][]any
	Mocks map[string]any
}

// Deps is what a Runtime is built from: the App's config, the Go values it
// was given, its Loaders, and its config center (nil without one), WASM
// filters and observer.
type Deps struct {
	Config   *config.Config
	Bindings *Bindings
	Log      *slog.Logger

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

	Center   *configcenter.Center
	Wasm     WasmSet
	Observer *observe.Observer
}

// New checks d.Config whole (every name it uses, against the Loaders; every
// service's implementation and reference's stub) and builds the services
// and references, reporting every error with its key path.
func New(d Deps) (*Runtime, error) {
	cfg, reg := d.Config, d.Bindings
	rt := &Runtime{cfg: cfg, log: d.Log, protocols: d.Protocols, filters: d.Filters, clusters: d.Clusters, lbs: d.LoadBalances,
		routers: d.Routers, regs: d.Registries, sds: d.Discoveries, mergers: d.Mergers, registryURLs: map[string]*kernel.URL{},
		refs: map[string]*reference{}, forwards: map[string]*atomic.Pointer[string]{}, reg: reg, cc: d.Center, wasm: d.Wasm, stopCh: make(chan struct{}), obs: d.Observer}
	registerMetadataTypes()
	c := &checks{d: d}
	rt.addMocks(c)
	rt.checkNames(c)
	rt.buildServices(c)
	rt.buildReferences(c)
	for id := range reg.Impls {
		if !rt.implUsed(id) {
			rt.log.Debug("weft: implementation registered but not exported by any provider.services entry", "ref", id)
		}
	}
	for id := range reg.Stubs {
		if _, ok := rt.refs[id]; !ok {
			c.fail("consumer.references."+id, fmt.Errorf("a stub is registered under %q but the config has no such reference (references: %s)",
				id, strings.Join(sortedKeys(cfg.Consumer.References), ", ")))
		}
	}
	if len(cfg.Provider.Services) == 0 && len(cfg.Consumer.References) == 0 {
		if d.Center != nil && !d.Center.Merged() {
			// check: false and the document not read yet: it may declare
			// them (they take a restart to apply).
			rt.log.Warn("weft: no services or references configured yet; the config center's document has not been read",
				"config_center", d.Center.Where())
		} else if !c.badRegistry {
			c.errs = append(c.errs, emptyConfigError(reg))
		}
	}
	if len(c.errs) > 0 {
		for _, f := range rt.wasmServices {
			f.Close()
		}
		return nil, fmt.Errorf("weft: config: %w", errors.Join(c.errs...))
	}
	if len(rt.wasmServices) > 0 {
		svc := make(map[string]*wasmfilter.Filter, len(rt.wasmServices))
		for _, f := range rt.wasmServices {
			svc["service:"+f.Name()] = f
		}
		rt.obs.SetWasmServices(svc)
	}
	rt.obs.SetReferences(rt.references)
	// WASM filters' callouts to ref: clusters call the App's references;
	// their bodies are in the App's serializations.
	sers := NewSerializations(d.Serializations)
	for _, f := range d.Wasm {
		f.SetReferences(rt.Reference)
		f.SetSerializations(sers)
	}
	return rt, nil
}

// checks collects New's errors, each with its key path.
type checks struct {
	d    Deps
	errs []error
	// badRegistry: a registry's address was refused. What follows from
	// its absence (nothing to export, a reference with no source of
	// providers) is not reported beside it: it would point the user away
	// from the one mistake.
	badRegistry bool
}

// errNoSource is a reference's error when nothing can give it providers.
var errNoSource = errors.New("no url, no registry")

func (c *checks) fail(path string, err error) {
	c.errs = append(c.errs, fmt.Errorf("%s: %w", path, err))
}

// list checks a filter list's names.
func (c *checks) list(path, list string) {
	if err := c.d.Filters.CheckNames(list); err != nil {
		c.fail(path, err)
	}
}

// name checks that name, when set, is an extension of point.
func (c *checks) name(path, name string, has func(string) bool, names func() []string, point string) {
	if name != "" && !has(name) {
		c.fail(path, &kernel.UnknownError{Point: point, Name: name, Known: names()})
	}
}

// addMocks makes the mock fallbacks the App was given into invokers that
// the mock cluster wrapper finds by name.
func (rt *Runtime) addMocks(c *checks) {
	fallbacks := map[string]kernel.Invoker{}
	for name, impl := range rt.reg.Mocks {
		inv, err := proxy.NewServiceInvoker(kernel.NewURL("mock", "", 0, name, nil), impl)
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("mock %q: %w", name, err))
			continue
		}
		fallbacks[name] = inv
	}
	rt.clusters.AddWrapper(cluster.MockWrapper(func(name string) (kernel.Invoker, bool) {
		iv, ok := fallbacks[name]
		return iv, ok
	}))
}

// checkNames checks every extension name of the App-wide settings (and of
// services and references where only a name is at stake) and opens the
// registries' URLs.
func (rt *Runtime) checkNames(c *checks) {
	cfg, d := rt.cfg, c.d
	sers, pools := d.Serializations, d.ThreadPools
	for id, p := range cfg.Protocols {
		c.name("protocols."+id+".name", protocolName(id, p), rt.protocols.Has, rt.protocols.Names, "protocol")
		c.name("protocols."+id+".serialization", p.Serialization, sers.Has, sers.Names, "serialization")
		c.name("protocols."+id+".threadpool", p.ThreadPool, pools.Has, pools.Names, "threadpool")
	}
	for id, sc := range cfg.Provider.Services {
		c.name("provider.services."+id+".serialization", sc.Serialization, sers.Has, sers.Names, "serialization")
	}
	for id, rc := range cfg.Consumer.References {
		c.name("consumer.references."+id+".serialization", rc.Serialization, sers.Has, sers.Names, "serialization")
	}
	for _, id := range sortedKeys(cfg.Registries) {
		path := "registries." + id + ".address"
		u, err := kernel.ParseURL(cfg.Registries[id].Address)
		if err != nil {
			c.fail(path, err)
			c.badRegistry = true
			continue
		}
		if !rt.regs.Has(u.Protocol) {
			c.badRegistry = true
			if err := optin.NotAdded("registry", u.Protocol, rt.regs.Names()); err != nil {
				c.fail(path, err)
				continue
			}
			c.fail(path, &kernel.UnknownError{Point: "registry", Name: u.Protocol, Known: rt.regs.Names()})
			continue
		}
		if r := cfg.Registries[id].Register; r != nil && !*r {
			u = u.WithParam(registry.KeyRegister, "false")
		}
		if s := cfg.Registries[id].Subscribe; s != nil && !*s {
			u = u.WithParam(registry.KeySubscribe, "false")
		}
		rt.registryURLs[id] = u
	}
	if err := registry.CheckModes(cfg.Application.RegisterMode, cfg.Application.MigrationStep); err != nil {
		c.fail("application", err)
	}
	if cfg.Application.RegisterMode == registry.RegisterInstance && cfg.Application.Name == "" && len(cfg.Provider.Services) > 0 {
		c.fail("application.name", errors.New("register_mode instance registers the application's instances: name the application (application.name), or use register_mode interface"))
	}
	c.list("provider.filter", cfg.Provider.Filter)
	c.list("consumer.filter", cfg.Consumer.Filter)
	c.name("consumer.cluster", cfg.Consumer.Cluster, rt.clusters.Has, rt.clusters.Names, "cluster")
	c.name("consumer.loadbalance", cfg.Consumer.LoadBalance, rt.lbs.Has, rt.lbs.Names, "loadbalance")
}

// buildServices checks and builds each provider.services entry.
func (rt *Runtime) buildServices(c *checks) {
	for _, id := range sortedKeys(rt.cfg.Provider.Services) {
		sc := rt.cfg.Provider.Services[id]
		path := "provider.services." + id
		c.list(path+".filter", sc.Filter)
		for m, mc := range sc.Methods {
			c.name(path+".methods."+m+".loadbalance", mc.LoadBalance, rt.lbs.Has, rt.lbs.Names, "loadbalance")
		}
		s, err := rt.buildService(id, sc, rt.reg)
		if ke := (*keyError)(nil); errors.As(err, &ke) {
			c.fail(path+"."+ke.key, ke.err)
			continue
		}
		if err != nil {
			c.fail(path, err)
			continue
		}
		rt.services = append(rt.services, s)
	}
}

// buildReferences checks and builds each consumer.references entry, and
// fills the stubs registered for it.
func (rt *Runtime) buildReferences(c *checks) {
	for _, id := range sortedKeys(rt.cfg.Consumer.References) {
		rc := rt.cfg.Consumer.References[id]
		path := "consumer.references." + id
		c.list(path+".filter", rc.Filter)
		c.name(path+".cluster", rc.Cluster, rt.clusters.Has, rt.clusters.Names, "cluster")
		c.name(path+".loadbalance", rc.LoadBalance, rt.lbs.Has, rt.lbs.Names, "loadbalance")
		for m, mc := range rc.Methods {
			c.name(path+".methods."+m+".loadbalance", mc.LoadBalance, rt.lbs.Has, rt.lbs.Names, "loadbalance")
		}
		c.errs = append(c.errs, rt.checkMerger(path, rc)...)
		if err := registry.CheckModes("", rc.MigrationStep); err != nil {
			c.fail(path+".migration_step", err)
		}
		if rc.Interface == "*" {
			// A gateway's template: referred per service it forwards.
			if !rt.gatewayTemplate(id) {
				c.fail(path+".interface", errors.New(`"*" is the template of a gateway's references: name this reference in the impl.forward of a service of interface "*"`))
			}
			continue
		}
		r, err := rt.buildReference(rt.cfg, id, rc)
		if err == nil {
			r.stubs = rt.reg.Stubs[id]
			for _, stub := range r.stubs {
				if err = proxy.Fill(stub, r.current); err != nil {
					break
				}
			}
		}
		if err != nil {
			if !(c.badRegistry && errors.Is(err, errNoSource)) {
				c.fail(path, err)
			}
			continue
		}
		rt.refs[id] = r
		rt.refIDs = append(rt.refIDs, id)
	}
}

// emptyConfigError says that an App has nothing to export and nothing to
// refer: it would start, idle and silent.
func emptyConfigError(reg *Bindings) error {
	msg := "no services or references configured, so there is nothing to export or refer: " +
		"declare provider.services.<id> (its implementation registered with weft.WithService) " +
		"or consumer.references.<id>; see the quick start in README.md (apps/examples/quickstart/weft.yaml)"
	if len(reg.Impls) > 0 {
		msg += "; implementations registered but not exported: " + strings.Join(sortedKeys(reg.Impls), ", ")
	}
	return errors.New(msg)
}

func (rt *Runtime) implUsed(ref string) bool {
	for _, s := range rt.services {
		if refName(s.id, rt.cfg.Provider.Services[s.id]) == ref {
			return true
		}
	}
	return false
}

func refName(id string, sc config.Service) string {
	if sc.Ref != "" {
		return sc.Ref
	}
	return id
}

func protocolName(id string, p config.Protocol) string {
	if p.Name != "" {
		return p.Name
	}
	return id
}

// protocolFor resolves a protocol id of the config, or a bare extension name.
func (rt *Runtime) protocolFor(id string) (config.Protocol, error) {
	if p, ok := rt.cfg.Protocols[id]; ok {
		p.Name = protocolName(id, p)
		return p, nil
	}
	if rt.protocols.Has(id) {
		return config.Protocol{Name: id}, nil
	}
	ids := sortedKeys(rt.cfg.Protocols)
	return config.Protocol{}, fmt.Errorf("protocol %q is neither a configured protocol id (%s) nor a protocol extension (known: %s)",
		id, strings.Join(ids, ", "), strings.Join(rt.protocols.Names(), ", "))
}

func (rt *Runtime) buildService(id string, sc config.Service, reg *Bindings) (*service, error) {
	var impl any
	var declared *idl.Interface
	gatewayed := sc.Interface == "*"
	if sc.Impl != nil && !gatewayed {
		var err error
		if declared, err = rt.declare(sc); err != nil {
			return nil, err
		}
		if sc.Interface == "" && declared != nil {
			sc.Interface = declared.Name
		}
	}
	if sc.Interface == "" {
		return nil, errors.New("interface is required, e.g. interface: org.example.Greeter")
	}
	if sc.Impl == nil && !gatewayed {
		if sc.IDL != "" || sc.Service != "" {
			return nil, errors.New("idl and service declare the interface of a service implemented from config: give impl (forward: <reference id>), or remove them and register a Go implementation")
		}
		ref := refName(id, sc)
		var ok bool
		if impl, ok = reg.Impls[ref]; !ok {
			return nil, fmt.Errorf("no implementation registered as %q (registered: %s); pass weft.WithService(%q, impl), or implement it from config with impl: {forward: <reference id>}",
				ref, strings.Join(sortedKeys(reg.Impls), ", "), ref)
		}
	}
	pc := rt.cfg.Provider
	params := map[string]string{
		kernel.KeyInterface:     sc.Interface,
		kernel.KeySide:          kernel.SideProvider,
		kernel.KeyServiceFilter: joinList(pc.Filter, sc.Filter),
	}
	set(params, kernel.KeyApplication, rt.cfg.Application.Name)
	// When the provider started: consumers ramp its weight up over `warmup`.
	params[kernel.KeyTimestamp] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	set(params, kernel.KeyGroup, sc.Group)
	set(params, kernel.KeyVersion, sc.Version)
	setInt(params, kernel.KeyTimeout, first(sc.Timeout, pc.Timeout))
	setInt(params, kernel.KeyExecutes, first(sc.Executes, pc.Executes))
	set(params, kernel.KeyAccessLog, firstString(sc.AccessLog, pc.AccessLog))
	// One token for the service's exports on every protocol, as in Dubbo.
	tok, err := token.Resolve(firstString(sc.Token, pc.Token))
	if err != nil {
		return nil, err
	}
	set(params, kernel.KeyToken, tok)
	set(params, kernel.KeySerialization, sc.Serialization)
	set(params, cluster.KeyTag, sc.Tag)
	if sc.Deprecated {
		params[KeyDeprecated] = "true"
	}
	setInt(params, tps.KeyRate, first(sc.TPS, pc.TPS))
	setInt(params, tps.KeyInterval, first(sc.TPSInterval, pc.TPSInterval))
	setInt(params, kernel.KeyWeight, sc.Weight)
	setMethods(params, sc.Methods)
	flatten(params, "", sc.Params)

	protoList := firstString(sc.Protocol, pc.Protocol)
	if protoList == "" {
		protoList = strings.Join(sortedKeys(rt.cfg.Protocols), ",")
	}
	if protoList == "" {
		protoList = extension.DefaultProtocol
	}
	register := true
	if r := firstBool(sc.Register, pc.Register); r != nil {
		register = *r
	}
	s := &service{id: id, impl: impl, register: register, delay: time.Duration(first(sc.Delay, pc.Delay)) * time.Millisecond}
	for _, pid := range splitList(protoList) {
		p, err := rt.protocolFor(pid)
		if err != nil {
			return nil, err
		}
		pp := map[string]string{}
		setInt(pp, kernel.KeyThreads, p.Threads)
		setInt(pp, kernel.KeyPayload, p.Payload)
		set(pp, kernel.KeySerialization, p.Serialization)
		set(pp, threadpool.KeyThreadPool, p.ThreadPool)
		setInt(pp, threadpool.KeyCoreThreads, p.CoreThreads)
		setInt(pp, threadpool.KeyQueues, p.Queues)
		setInt(pp, threadpool.KeyAlive, p.Alive)
		flatten(pp, "", p.Params)
		for k, v := range params {
			pp[k] = v
		}
		host := p.Host
		if host == "" {
			host = "127.0.0.1"
		}
		s.urls = append(s.urls, kernel.NewURL(p.Name, host, p.Port, sc.Interface, pp))
	}
	var inner innerInvoker
	switch {
	case gatewayed:
		g, err := rt.newGateway(id, sc, s.urls[0])
		if err != nil {
			return nil, err
		}
		// Never registered: "*" names no service a consumer looks up.
		s.register = false
		rt.gateways = append(rt.gateways, g)
		inner = g
	case sc.Impl != nil:
		h, err := rt.handler(id, sc.Impl, declared)
		if err != nil {
			return nil, err
		}
		if declared == nil {
			inner = passThrough(s.urls[0], h)
		} else {
			inner = idlInvoker{idl.NewInvoker(s.urls[0], declared, h.Handler)}
		}
	default:
		inv, err := proxy.NewServiceInvoker(s.urls[0], impl)
		if err != nil {
			return nil, err
		}
		inner = goInvoker{inv}
	}
	streams := map[string]string{}
	for m, k := range inner.StreamKinds() {
		streams[m+"."+kernel.KeyStream] = k.String()
	}
	for i, u := range s.urls {
		if names := inner.MethodNames(); len(names) > 0 {
			s.urls[i] = u.WithParam(kernel.KeyMethods, strings.Join(names, ","))
		}
		if len(streams) > 0 {
			s.urls[i] = s.urls[i].WithParams(streams)
		}
		s.invokers = append(s.invokers, inner.withURL(s.urls[i]))
	}
	return s, nil
}

// buildReference makes the reference id of cfg, not yet referred and
// without stubs.
func (rt *Runtime) buildReference(cfg *config.Config, id string, rc config.Reference) (*reference, error) {
	if rc.Interface == "" {
		return nil, errors.New("interface is required, e.g. interface: org.example.Greeter")
	}
	cc := cfg.Consumer
	params := map[string]string{
		kernel.KeyInterface:       rc.Interface,
		kernel.KeySide:            kernel.SideConsumer,
		kernel.KeyReferenceFilter: joinList(cc.Filter, rc.Filter),
	}
	set(params, kernel.KeyApplication, cfg.Application.Name)
	set(params, kernel.KeyGroup, rc.Group)
	set(params, kernel.KeyVersion, rc.Version)
	setInt(params, kernel.KeyTimeout, first(rc.Timeout, cc.Timeout))
	if r := rc.Retries; r != nil {
		params[kernel.KeyRetries] = strconv.Itoa(*r)
	} else if r := cc.Retries; r != nil {
		params[kernel.KeyRetries] = strconv.Itoa(*r)
	}
	set(params, kernel.KeyCluster, firstString(rc.Cluster, cc.Cluster))
	set(params, cluster.KeyMock, rc.Mock)
	set(params, cluster.KeyMerger, rc.Merger)
	if rc.Generic {
		params[KeyGeneric] = "true"
	}
	if rc.Lazy {
		params[KeyLazy] = "true"
	}
	if rc.Sticky {
		params[cluster.KeySticky] = "true"
	}
	setInt(params, "connections", rc.Connections)
	set(params, registry.KeyProvidedBy, rc.ProvidedBy)
	set(params, registry.KeyMigrationStep, rc.MigrationStep)
	set(params, kernel.KeyLoadBalance, firstString(rc.LoadBalance, cc.LoadBalance))
	set(params, kernel.KeySerialization, rc.Serialization)
	set(params, cluster.KeyTag, rc.Tag)
	setInt(params, kernel.KeyActives, first(rc.Actives, cc.Actives))
	check := DefaultCheck
	if c := firstBool(rc.Check, cc.Check); c != nil {
		check = *c
	}
	params[KeyCheck] = strconv.FormatBool(check)
	setMethods(params, rc.Methods)
	flatten(params, "", rc.Params)

	r := &reference{id: id, check: check, url: kernel.NewURL("consumer", "127.0.0.1", 0, rc.Interface, params)}
	routers, err := rt.buildRouters(rc)
	if err != nil {
		return nil, err
	}
	r.routers = routers
	switch {
	case rc.URL != "":
		for _, raw := range strings.Split(rc.URL, ";") {
			if raw = strings.TrimSpace(raw); raw == "" {
				continue
			}
			pu, err := kernel.ParseURL(raw)
			if err != nil {
				return nil, fmt.Errorf("url: %w", err)
			}
			if pu.Path == "" {
				pu = kernel.NewURL(pu.Protocol, pu.Host, pu.Port, rc.Interface, pu.Params())
			}
			r.targets = append(r.targets, registry.MergeURL(pu, params))
		}
	default:
		name := rc.Protocol
		if name == "" {
			// Dubbo refers in process when the App exports the same service.
			key := r.url.ServiceKey()
			for _, s := range rt.services {
				if s.urls[0].ServiceKey() == key {
					name = "injvm"
				}
			}
		}
		if name != "injvm" && len(rt.registryURLs) > 0 {
			// From the registry; a protocol named keeps the providers of
			// that protocol (Dubbo's RegistryDirectory with the
			// consumer's `protocol`), as when one service is exported on
			// dubbo and tri at once.
			if name != "" {
				p, err := rt.protocolFor(name)
				if err != nil {
					return nil, err
				}
				r.url = r.url.WithParam(cluster.KeyProtocols, p.Name)
			}
			r.discover = true
			break
		}
		if name == "" {
			return nil, fmt.Errorf("%w and no service %s exported by this App: set url: dubbo://host:port, protocol: injvm, or a registry", errNoSource, r.url.ServiceKey())
		}
		p, err := rt.protocolFor(name)
		if err != nil {
			return nil, err
		}
		r.targets = append(r.targets, registry.MergeURL(kernel.NewURL(p.Name, "127.0.0.1", p.Port, rc.Interface, nil), params))
	}
	for _, t := range r.targets {
		if !rt.protocols.Has(t.Protocol) {
			return nil, &kernel.UnknownError{Point: "protocol", Name: t.Protocol, Known: rt.protocols.Names()}
		}
	}
	return r, nil
}

// buildRouters makes a reference's router chain: the configured rules,
// and the tag router, always on (it passes untagged traffic through) unless
// a tag rule takes its place.
func (rt *Runtime) buildRouters(rc config.Reference) ([]extension.Router, error) {
	var routers []extension.Router
	hasTag := false
	for i, rcfg := range rc.Routers {
		kind := rcfg.Type
		if kind == "" {
			kind = extension.DefaultRouter
		}
		p := map[string]string{"rule": rcfg.Rule, "force": strconv.FormatBool(rcfg.Force), "priority": strconv.Itoa(rcfg.Priority)}
		if rcfg.Enabled != nil {
			p["enabled"] = strconv.FormatBool(*rcfg.Enabled)
		}
		if kind == cluster.TagRouterName {
			hasTag = true
			if rcfg.Priority == 0 {
				delete(p, "priority") // the tag router's default runs it first
			}
			var tags []string
			for _, tc := range rcfg.Tags {
				tags = append(tags, tc.Name+"="+strings.Join(tc.Addresses, ","))
			}
			p["tags"] = strings.Join(tags, ";")
		} else if len(rcfg.Tags) > 0 {
			return nil, fmt.Errorf("routers[%d]: tags belong to a rule of type tag, not %s", i, kind)
		}
		router, err := rt.router(kernel.NewURL(kind, "0.0.0.0", 0, rc.Interface, p))
		if err != nil {
			return nil, fmt.Errorf("routers[%d]: %w", i, err)
		}
		routers = append(routers, router)
	}
	if !hasTag {
		tag, err := rt.router(kernel.NewURL(cluster.TagRouterName, "0.0.0.0", 0, rc.Interface, nil))
		if err != nil {
			return nil, err
		}
		routers = append([]extension.Router{tag}, routers...)
	}
	return routers, nil
}

// referOne turns one provider URL, merged with the consumer's settings
// already, into an invoker: the protocol's invoker and the per-invoker
// filters. Static references and the registry layer's directories both
// refer through it.
func (rt *Runtime) referOne(ctx context.Context, t *kernel.URL) (kernel.Invoker, error) {
	p, err := rt.protocols.Get(t.Protocol)
	if err != nil {
		return nil, err
	}
	var iv kernel.Invoker
	if t.ParamBool(KeyLazy, false) {
		iv = &lazyInvoker{url: t, refer: func() (kernel.Invoker, error) { return p.Refer(context.WithoutCancel(ctx), t) }}
	} else if iv, err = p.Refer(ctx, t); err != nil {
		return nil, err
	}
	filters, err := rt.filters.Activate(t, kernel.KeyReferenceFilter, kernel.GroupConsumer)
	if err != nil {
		iv.Destroy()
		return nil, err
	}
	_, perInvoker := extension.SplitClusterScoped(filters)
	if t.ParamBool(KeyDeprecated, false) {
		// Dubbo's DeprecatedFilter says it on each call; once per
		// provider is enough to be seen.
		rt.log.Warn("weft: the service is deprecated (its provider says deprecated=true): plan to stop calling it",
			"interface", t.Interface(), "provider", t.Address())
	}
	return extension.BuildChain(iv, perInvoker), nil
}

// KeyDeprecated is Dubbo's deprecated, on a provider's URL.
const KeyDeprecated = "deprecated"

// registerLater registers a service d after start (Dubbo's delay), unless
// the App stops first.
func (rt *Runtime) registerLater(id string, pub *kernel.URL, d time.Duration) {
	rt.log.Info("weft: exported, registered after its delay", "service", id, "interface", pub.Interface(), "delay", d)
	rt.drains.Add(1)
	go func() {
		defer rt.drains.Done()
		select {
		case <-time.After(d):
		case <-rt.stopCh:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.layer.Register(ctx, id, pub); err != nil {
			rt.log.Error("weft: registering after the delay failed", "service", id, "error", err)
			return
		}
		rt.log.Info("weft: exported", "service", id, "interface", pub.Interface(), "protocol", pub.Protocol,
			"address", pub.Address(), "registries", strings.Join(rt.layer.IDs(), ","))
	}()
}

// router builds the router a router URL describes; its protocol names the
// factory.
func (rt *Runtime) router(u *kernel.URL) (extension.Router, error) {
	f, err := rt.routers.Get(u.Protocol)
	if err != nil {
		return nil, err
	}
	return f.GetRouter(u)
}

func (rt *Runtime) start(ctx context.Context) (err error) {
	began := time.Now()
	defer func() {
		if err != nil {
			// fx stops only what started whole: undo what this start
			// did (exports, registrations, references) before failing.
			rt.stop(context.WithoutCancel(ctx))
		}
	}()
	layer, err := registry.Open(rt.registryURLs, registry.Options{
		Log: rt.log, Registries: rt.regs, Discoveries: rt.sds,
		Events: registry.Events{Registered: rt.obs.Registered, Subscribed: rt.obs.Subscribed, Notified: rt.obs.Notified},
		App:    rt.cfg.Application.Name, RegisterMode: rt.cfg.Application.RegisterMode, MigrationStep: rt.cfg.Application.MigrationStep,
		Fetch: rt.fetchMetadata, MetadataURL: rt.metadataURL,
	})
	if err != nil {
		return fmt.Errorf("weft: %w", err)
	}
	rt.layer = layer
	// Export everything, then register: a service is registered once its
	// server listens, with the port it really got, and the App's
	// MetadataService (application-level discovery) answers before any
	// instance points consumers to it.
	type pending struct {
		id  string
		pub *kernel.URL
	}
	var pubs []pending
	// A protocol whose port is 0 gets a free port at its first export;
	// the App's other services on it share that port, as in Dubbo (one
	// server per protocol), and an application instance has one port per
	// protocol to announce.
	bound := map[string]int{}
	for _, s := range rt.services {
		for _, inv := range s.invokers {
			u := inv.URL()
			key := u.Protocol + "://" + u.Host
			if p, ok := bound[key]; ok && u.Port == 0 && u.Protocol != "injvm" {
				inv = inv.withURL(u.WithAddress(u.Protocol, u.Host, p))
			}
			pub, err := rt.export(ctx, s.id, inv)
			if err != nil {
				return err
			}
			if u.Port == 0 && pub.Port != 0 {
				bound[key] = pub.Port
			}
			if pub.Protocol != "injvm" {
				pubs = append(pubs, pending{s.id, pub})
			}
		}
	}
	if len(pubs) > 0 && layer.RegistersInstances(rt.cfg.Application.Name) {
		if err := rt.exportMetadataService(ctx, pubs[0].pub); err != nil {
			return err
		}
	}
	for _, p := range pubs {
		if !rt.serviceByID(p.id).register {
			rt.log.Info("weft: exported, not registered (register: false)", "service", p.id, "interface", p.pub.Interface(),
				"protocol", p.pub.Protocol, "address", p.pub.Address())
			continue
		}
		if d := rt.serviceByID(p.id).delay; d > 0 {
			rt.registerLater(p.id, p.pub, d)
			continue
		}
		if err := rt.layer.Register(ctx, p.id, p.pub); err != nil {
			return fmt.Errorf("weft: %w", err)
		}
		// With port 0 this line is where the bound port shows.
		rt.log.Info("weft: exported", "service", p.id, "interface", p.pub.Interface(), "protocol", p.pub.Protocol,
			"address", p.pub.Address(), "registries", strings.Join(rt.layer.IDs(), ","))
	}
	for _, id := range rt.refIDs {
		if err := rt.refer(ctx, rt.refs[id]); err != nil {
			return fmt.Errorf("weft: refer %s: %w", id, err)
		}
	}
	rt.watchConfig()
	for _, f := range rt.wasmServices {
		f.Watch(wasmfilter.DefaultWatchInterval) // a new module replaces the old
	}
	rt.life.started.Store(true)
	rt.log.Info("weft: started", "application", rt.cfg.Application.Name, "services", len(rt.services),
		"references", len(rt.refIDs), "took", time.Since(began).Round(time.Microsecond))
	return nil
}

// export exports one service on its protocol and returns the URL to
// publish: with the port its server really got.
func (rt *Runtime) export(ctx context.Context, id string, inner innerInvoker) (*kernel.URL, error) {
	u := inner.URL()
	p, err := rt.protocols.Get(u.Protocol)
	if err != nil {
		return nil, err
	}
	filters, err := rt.filters.Activate(u, kernel.KeyServiceFilter, kernel.GroupProvider)
	if err != nil {
		return nil, err
	}
	chain := extension.BuildChain(inner, filters)
	if rt.cc != nil {
		// A config center may change the service's filter list later.
		sc := &serviceChain{id: id, inner: inner}
		first := chain
		sc.cur.Store(&first)
		rt.chains = append(rt.chains, sc)
		chain = sc
	}
	// Generic calls become the real call before any filter runs, so that
	// every filter sees the real method and arguments, whatever its order.
	chain = generic.Wrap(chain)
	if fd := inner.protoFile(); fd != nil {
		chain = described{chain, fd} // gRPC reflection describes it
	}
	rt.regMu.Lock()
	if rt.callable == nil {
		rt.callable = map[string]kernel.Invoker{}
	}
	if _, ok := rt.callable[id]; !ok {
		rt.callable[id] = chain // QoS invoke's way in: the first protocol's
	}
	rt.regMu.Unlock()
	exp, err := p.Export(ctx, chain)
	if err != nil {
		return nil, fmt.Errorf("weft: export %s: %w", id, err)
	}
	rt.exporters = append(rt.exporters, exp)
	// Registered once the server listens, with the port it really got.
	pub := u
	if b, ok := exp.(extension.BoundExporter); ok && u.Port == 0 {
		if _, port, err := net.SplitHostPort(b.BoundAddr()); err == nil {
			p, _ := strconv.Atoi(port)
			pub = u.WithAddress(u.Protocol, u.Host, p)
		}
	}
	rt.regMu.Lock()
	rt.exported = append(rt.exported, exportedURL{id, pub})
	rt.regMu.Unlock()
	if u.Protocol == "injvm" {
		rt.log.Info("weft: exported", "service", id, "interface", u.Interface(), "protocol", u.Protocol)
	}
	return pub, nil
}

// registrations lists the App's registrations (none before start).
func (rt *Runtime) registrations() []registry.Registration {
	if rt.layer == nil {
		return nil
	}
	return rt.layer.Registrations()
}

// setOnline registers (on) or unregisters, in every registry, the services
// whose ids are in ids, leaving them exported: QoS's online and offline.
// It returns the service keys it was asked to change; a registry that fails
// leaves that registration as it was, and says so in the error.
func (rt *Runtime) setOnline(ctx context.Context, ids map[string]bool, on bool) ([]string, error) {
	verb, what := "unregister", "offline"
	if on {
		verb, what = "register", "online"
	}
	switch {
	case rt.life.stopping.Load():
		return nil, fmt.Errorf("cannot %s: the App is stopping and has left its registries for good", verb)
	case !rt.life.started.Load():
		return nil, fmt.Errorf("cannot %s yet: the App is still starting (its services register as they are exported); try again once startup answers true", verb)
	}
	var keys []string
	for _, s := range rt.services {
		if ids[s.id] {
			keys = append(keys, s.urls[0].ServiceKey())
		}
	}
	err := rt.layer.SetOnline(ctx, ids, on, func(service, reg string, u *kernel.URL) {
		rt.log.Info("weft: qos: "+what, "service", service, "registry", reg, "url", u.String())
	})
	if errors.Is(err, registry.ErrNotRegistered) {
		return nil, fmt.Errorf("%w in any registry, nothing to %s: %s (the App has no registries, or exports it in process only); %s applies to services registered in registries.<id>",
			qos.ErrNotFound, verb, strings.Join(keys, ", "), what)
	}
	return keys, err
}

func (rt *Runtime) refer(ctx context.Context, r *reference) error {
	if r.discover && !r.registryRouted {
		// A mesh's routes, from registries that route: part of the
		// reference's own chain, which governance rules add to.
		extra, err := rt.layer.Routers(r.url)
		if err != nil {
			return err
		}
		r.routers, r.registryRouted = append(r.routers, extra...), true
	}
	iv, rd, err := rt.join(ctx, r)
	if err != nil {
		return err
	}
	if rd != nil {
		if r.sub, err = rt.layer.Subscribe(ctx, r.url, rd); err != nil {
			iv.Destroy()
			return err
		}
	}
	r.invoker.Store(&iv)
	if r.check && !waitAvailable(ctx, iv, CheckWait) {
		where := "at " + strings.Join(targetAddrs(r.targets), ", ")
		if rd != nil {
			where = "in registries " + strings.Join(rt.layer.IDs(), ", ")
		}
		return kernel.Errorf(kernel.CodeNoProvider, "no provider of %s available %s after %v (check: true, Dubbo's default): start one, or set check: false on the reference (or consumer.check: false) to start without it",
			r.url.ServiceKey(), where, CheckWait)
	}
	if rt.cc != nil {
		// Dubbo Admin's rules from the config center, watched while
		// the reference lives.
		r.gov = gov.Watch(rt.cc.Dynamic(), rt.log, r.id, r.url, rt.cfg.Application.Name, r.dir, r.routers)
	}
	if rd != nil {
		rt.log.Info("weft: referred", "reference", r.id, "interface", r.url.Interface(),
			"registries", strings.Join(rt.layer.IDs(), ","), "providers", len(rd.Invokers()))
	} else {
		rt.log.Info("weft: referred", "reference", r.id, "interface", r.url.Interface(), "providers", len(r.targets), "urls", strings.Join(targetAddrs(r.targets), ","))
	}
	return nil
}

// Dubbo's check. KeyCheck is its consumer URL parameter; CheckWait how long
// a reference with check waits for a provider at start (dubbo-go's 3 s: a
// registry lists providers a moment after the subscription).
const (
	KeyCheck     = "check"
	DefaultCheck = true
)

// CheckWait is a variable for tests.
var CheckWait = 3 * time.Second

// waitAvailable waits up to d for iv to have an available provider.
func waitAvailable(ctx context.Context, iv kernel.Invoker, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !iv.IsAvailable() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func targetAddrs(ts []*kernel.URL) []string {
	addrs := make([]string, len(ts))
	for i, t := range ts {
		addrs[i] = t.Address()
	}
	return addrs
}

// join builds r's invoker: its directory (static, or one rd that the
// caller connects to the registries: see discovery), routers, cluster and
// cluster-scoped filters. It sets r.dir.
func (rt *Runtime) join(ctx context.Context, r *reference) (iv kernel.Invoker, rd cluster.PartDirectory, err error) {
	// One consumer list, split by scope: cluster-scoped filters run once per
	// call before routing; the others around each provider's invoker.
	chain, err := rt.filters.Activate(r.url, kernel.KeyReferenceFilter, kernel.GroupConsumer)
	if err != nil {
		return nil, nil, err
	}
	clusterFilters, _ := extension.SplitClusterScoped(chain)
	cl, err := rt.clusters.Choose(r.url, "", kernel.KeyCluster)
	if err != nil {
		return nil, nil, err
	}
	var dir extension.Directory
	if r.discover {
		if rd, cl, err = rt.discovery(ctx, r, cl); err != nil {
			return nil, nil, err
		}
		dir, r.dir = rd, rd
	} else {
		var invokers []kernel.Invoker
		destroy := func() {
			for _, iv := range invokers {
				iv.Destroy()
			}
		}
		for _, t := range r.targets {
			iv, err := rt.referOne(ctx, t)
			if err != nil {
				destroy()
				return nil, nil, err
			}
			invokers = append(invokers, iv)
		}
		sd := cluster.NewStaticDirectory(r.url, invokers, rt.log)
		sd.SetRouters(r.routers)
		dir, r.dir = sd, sd
	}
	iv, err = cl.Join(dir)
	if err != nil {
		dir.Destroy()
		return nil, nil, err
	}
	r.joined = iv
	iv = extension.BuildChain(iv, clusterFilters)
	if r.url.ParamBool(KeyGeneric, false) {
		iv = genericReference{iv}
	}
	if rt.cc != nil {
		// Referred again when the config center changes it: count calls in
		// flight so the old invoker is destroyed only once they are done.
		iv = &liveInvoker{Invoker: iv}
	}
	return iv, rd, nil
}

// stop releases references first, then unexports: calls in flight finish
// against services that are still there.
func (rt *Runtime) stop(ctx context.Context) error {
	// Not ready from the first moment, before anything leaves: a
	// Kubernetes Service stops sending while the registries catch up.
	rt.life.stopping.Store(true)
	defer rt.life.stopped.Store(true)
	began := time.Now()
	rt.log.Info("weft: stopping", "application", rt.cfg.Application.Name)
	defer func() {
		rt.log.Info("weft: stopped", "application", rt.cfg.Application.Name, "took", time.Since(began).Round(time.Microsecond))
	}()
	// No config change applies from here on; replaced invokers still
	// draining are destroyed now.
	rt.unwatchConfig()
	rt.applyMu.Lock()
	rt.stopped = true
	rt.applyMu.Unlock()
	close(rt.stopCh)
	rt.drains.Wait()
	// Unregister first, so consumers stop choosing this provider while it
	// still answers; then references; then exporters, which refuse new
	// calls and drain those in flight before closing. (Those taken
	// offline are unregistered already; the layer waits for an online or
	// offline under way.)
	if rt.layer != nil {
		rt.layer.UnregisterAll(ctx)
		if d := time.Duration(rt.cfg.Provider.Shutdown.Wait) * time.Millisecond; d > 0 && !rt.layer.Empty() && len(rt.exporters) > 0 {
			// Give consumers time to hear of the unregistration.
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
	}
	for i := len(rt.refIDs) - 1; i >= 0; i-- {
		r := rt.refs[rt.refIDs[i]]
		if r.gov != nil {
			r.gov.Close()
		}
		if p := r.invoker.Swap(nil); p != nil {
			(*p).Destroy()
		}
	}
	for _, g := range rt.gateways {
		g.close()
	}
	for i := len(rt.exporters) - 1; i >= 0; i-- {
		rt.exporters[i].Unexport()
	}
	rt.exporters = nil
	for _, f := range rt.wasmServices {
		f.Close() // after the exporters drained the calls it served
	}
	if rt.layer != nil {
		rt.layer.Close(ctx)
	}
	return nil
}

func joinList(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func set(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func setInt(m map[string]string, k string, v int) {
	if v != 0 {
		m[k] = strconv.Itoa(v)
	}
}

func first(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func firstString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func setMethods(params map[string]string, methods map[string]config.Method) {
	for m, mc := range methods {
		setInt(params, m+"."+kernel.KeyTimeout, mc.Timeout)
		if mc.Retries != nil {
			params[m+"."+kernel.KeyRetries] = strconv.Itoa(*mc.Retries)
		}
		set(params, m+"."+kernel.KeyLoadBalance, mc.LoadBalance)
		setInt(params, m+"."+kernel.KeyExecutes, mc.Executes)
		setInt(params, m+"."+kernel.KeyActives, mc.Actives)
		set(params, m+"."+cluster.KeyMock, mc.Mock)
		if mc.Sticky {
			params[m+"."+cluster.KeySticky] = "true"
		}
		setInt(params, m+"."+cluster.KeyForks, mc.Forks)
		set(params, m+"."+cluster.KeyMerger, mc.Merger)
		if mc.Return != nil {
			params[m+".return"] = strconv.FormatBool(*mc.Return)
		}
	}
}

// flatten writes free-form params into URL parameters, nested maps as dotted
// keys (hash.nodes: 160 -> "hash.nodes=160").
func flatten(dst map[string]string, prefix string, src map[string]any) {
	for k, v := range src {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			flatten(dst, key, x)
		case nil:
		default:
			dst[key] = fmt.Sprint(x)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func firstBool(a, b *bool) *bool {
	if a != nil {
		return a
	}
	return b
}

// serviceByID is the service of a provider.services id.
func (rt *Runtime) serviceByID(id string) *service {
	for _, s := range rt.services {
		if s.id == id {
			return s
		}
	}
	return &service{id: id, register: true}
}

// references reads, for the metrics, the outlier detection and the retry
// budget of each reference that turns one on.
func (rt *Runtime) references() []metrics.ReferenceStats {
	if !rt.life.started.Load() {
		return nil
	}
	rt.applyMu.Lock()
	defer rt.applyMu.Unlock()
	var out []metrics.ReferenceStats
	for _, id := range rt.refIDs {
		r := rt.refs[id]
		st := metrics.ReferenceStats{Reference: id, Service: r.url.ServiceKey()}
		if ej, ok := r.dir.(cluster.EjectionReporter); ok && r.url.ParamBool(cluster.KeyOutlier, false) {
			st.Outlier = true
			st.Ejections, st.Ejected = ej.Ejections()
		}
		if b, ok := r.joined.(cluster.BudgetReporter); ok {
			st.RetriesAllowed, st.RetriesDenied, st.Budget = b.RetryBudget()
		}
		if st.Outlier || st.Budget {
			out = append(out, st)
		}
	}
	return out
}
