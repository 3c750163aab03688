// Package registry is weft's registry layer, what Dubbo's RegistryProtocol
// is to Dubbo: everything between "this service is exported" or "this
// reference wants providers" and the registries an App is configured with.
//
//   - Provider side: a service is exported first and registered after, with
//     the port its server really got, in every registry (Register); QoS's
//     offline/online unregister and register it again (SetOnline); at stop
//     every registration leaves first (UnregisterAll), while the servers
//     still answer, so consumers stop choosing this provider before it goes.
//   - Consumer side: a reference is one subscription in every registry whose
//     lists are merged (the multi-registry union) into one
//     cluster.RegistryDirectory, which refers each provider (Subscribe); the
//     cluster joins that directory. The consumer's own URL is registered
//     too (category consumers), as Dubbo does, for the registries that keep
//     consumers.
//
// A registry is one extension.Registry plugin; this layer is the only code
// that calls one, so a new registry (or a new discovery mode behind the
// Registry interface) is a plugin and nothing else. The package knows
// neither fx nor koanf: the App opens a Layer from its config.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Dubbo's URL keys the layer reads and writes.
const (
	// KeyRegister false on a reference keeps its consumer URL out of the
	// registries (Dubbo's register); on a service, out of them entirely.
	KeyRegister = "register"
	// KeySubscribe false on a registry's URL: consumers look nothing up in
	// it (Dubbo's RegistryConfig subscribe); a provider-only registry.
	KeySubscribe = "subscribe"
)

// Events receives the layer's outcomes, for metrics; nil methods are not
// called. All may be called from any goroutine.
type Events struct {
	Registered func(err error)
	Subscribed func(err error)
	Notified   func(providers int)
}

// Referrer turns one provider URL, already merged with the consumer's
// settings, into an invoker: the protocol's Refer and the per-invoker
// filters. The App provides it; the layer calls it for every provider a
// registry lists.
type Referrer func(ctx context.Context, provider *kernel.URL) (kernel.Invoker, error)

// Layer is an App's registries and what it has registered and subscribed in
// them. Its methods are safe for concurrent use.
type Layer struct {
	log    *slog.Logger
	events Events
	ids    []string // sorted registry ids
	// regs are the interface-level registries, insts the application-
	// level ones (service discovery behind the Registry interface), by
	// registry id; a registry may be either or both.
	regs      map[string]extension.Registry
	insts     map[string]*instanceRegistry
	mode      string // register mode: interface, instance, all
	migration string // the consumers' default migration step
	// noRegister and noSubscribe are the registries whose URL says
	// register=false (nothing is registered there: a consumer-only
	// registry) or subscribe=false (nothing is looked up there): Dubbo's
	// RegistryConfig register and subscribe.
	noRegister, noSubscribe map[string]bool

	// opMu serialises the registry calls of SetOnline and UnregisterAll;
	// mu guards the slices.
	opMu          sync.Mutex
	mu            sync.Mutex
	registrations []*registration
	subs          []*Subscription
	closed        bool
}

type registration struct {
	service  string // the App's id of the service (provider.services.<id>)
	registry string // registries.<id>
	level    string // interface or instance
	reg      extension.Registry
	url      *kernel.URL
	on       atomic.Bool // registered now: false after offline or stop
}

// Registration describes one (service, registry) registration.
type Registration struct {
	Service, Registry string
	// Level is interface or instance (application level).
	Level string
	URL   *kernel.URL
	// Registered is false once QoS took it offline (or the App stopped).
	Registered bool
}

// Options configure a Layer.
type Options struct {
	Log    *slog.Logger
	Events Events
	// Registries and Discoveries are the factories, by the address URL's
	// protocol; a registry plugin that supports application-level
	// discovery provides both under one name.
	Registries  *kernel.Loader[extension.RegistryFactory]
	Discoveries *kernel.Loader[extension.ServiceDiscoveryFactory]
	// App is the application's name; application-level registration
	// needs one.
	App string
	// RegisterMode is interface, instance or all ("": all, Dubbo 3's
	// default); MigrationStep is the consumers' FORCE_INTERFACE,
	// APPLICATION_FIRST or FORCE_APPLICATION ("": APPLICATION_FIRST).
	RegisterMode, MigrationStep string
	// Fetch reads another instance's metadata; MetadataURL is where this
	// App's MetadataService answers (nil until it is exported).
	Fetch       MetadataFetcher
	MetadataURL func() *kernel.URL
}

// CheckModes validates a register mode and a migration step, Dubbo's names.
func CheckModes(mode, step string) error {
	switch mode {
	case "", RegisterInterface, RegisterInstance, RegisterAll:
	default:
		return fmt.Errorf("register_mode %q: want interface, instance or all (Dubbo's register-mode; default all)", clip(mode))
	}
	switch step {
	case "", ForceInterface, ApplicationFirst, ForceApplication:
	default:
		return fmt.Errorf("migration step %q: want FORCE_INTERFACE, APPLICATION_FIRST or FORCE_APPLICATION (default APPLICATION_FIRST)", clip(step))
	}
	return nil
}

// Open opens the registries at addrs (by the App's registry id): each as
// an interface-level registry, unless its URL says registry-type=service,
// and as an application-level one when its plugin supports it. On error
// the registries opened so far are closed.
func Open(addrs map[string]*kernel.URL, o Options) (*Layer, error) {
	if err := CheckModes(o.RegisterMode, o.MigrationStep); err != nil {
		return nil, err
	}
	l := &Layer{log: o.Log, events: o.Events, regs: map[string]extension.Registry{}, insts: map[string]*instanceRegistry{},
		mode: firstOf(o.RegisterMode, DefaultRegisterMode), migration: firstOf(o.MigrationStep, DefaultMigrationStep)}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.noRegister, l.noSubscribe = map[string]bool{}, map[string]bool{}
	for id, u := range addrs {
		l.ids = append(l.ids, id)
		l.noRegister[id] = !u.ParamBool(KeyRegister, true)
		l.noSubscribe[id] = !u.ParamBool(KeySubscribe, true)
	}
	sort.Strings(l.ids)
	fail := func(id string, u *kernel.URL, err error) (*Layer, error) {
		l.closeRegistries()
		return nil, fmt.Errorf("registries.%s (%s): %w", id, u, err)
	}
	for _, id := range l.ids {
		u := addrs[id]
		serviceOnly := u.Param(KeyRegistryType) == RegistryTypeService
		if !serviceOnly {
			f, err := o.Registries.Get(u.Protocol)
			if err != nil {
				return fail(id, u, err)
			}
			reg, err := f.GetRegistry(u)
			if err != nil {
				return fail(id, u, err)
			}
			l.regs[id] = reg
		}
		if o.Discoveries == nil || !o.Discoveries.Has(u.Protocol) {
			if serviceOnly {
				var known []string
				if o.Discoveries != nil {
					known = o.Discoveries.Names()
				}
				return fail(id, u, fmt.Errorf("registry-type=service: the %s registry has no application-level discovery (those that have: %s); remove registry-type",
					u.Protocol, strings.Join(known, ", ")))
			}
			continue
		}
		f, err := o.Discoveries.Get(u.Protocol)
		if err != nil {
			return fail(id, u, err)
		}
		sd, err := f.GetServiceDiscovery(u)
		if err != nil {
			return fail(id, u, fmt.Errorf("application-level discovery: %w", err))
		}
		metadataURL := o.MetadataURL
		if metadataURL == nil {
			metadataURL = func() *kernel.URL { return nil }
		}
		l.insts[id] = newInstanceRegistry(sd, o.App, o.Fetch, metadataURL, l.log)
	}
	return l, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// RegistersInstances reports whether services are registered at
// application level: the mode asks for it, the App has a name and a
// registry supports it. The App then exports a MetadataService.
func (l *Layer) RegistersInstances(app string) bool {
	return l.mode != RegisterInterface && app != "" && len(l.insts) > 0
}

// Metadata is the App's metadata of revision, for its MetadataService; nil
// when it has no such revision.
func (l *Layer) Metadata(rev string) *MetadataInfo {
	for _, id := range l.ids {
		if ir := l.insts[id]; ir != nil {
			if md := ir.Metadata(rev); md != nil {
				return md
			}
		}
	}
	return nil
}

// Empty reports whether the App has no registries.
func (l *Layer) Empty() bool { return len(l.ids) == 0 }

// IDs returns the registries' ids, sorted.
func (l *Layer) IDs() []string { return append([]string(nil), l.ids...) }

// Register publishes the exported URL of service in every registry: at
// interface level (its URL), at application level (the App's instance and
// metadata) or both, as the register mode says. url must carry the address
// the server really listens on. A service whose URL says register=false is
// exported but not registered.
func (l *Layer) Register(ctx context.Context, service string, url *kernel.URL) error {
	if !url.ParamBool(KeyRegister, true) {
		return nil
	}
	app := url.Param(kernel.KeyApplication)
	for _, id := range l.ids {
		if l.noRegister[id] {
			continue
		}
		var ms []unionMember
		if reg := l.regs[id]; reg != nil && l.mode != RegisterInstance {
			ms = append(ms, unionMember{id: id, reg: reg})
		}
		if ir := l.insts[id]; ir != nil && l.RegistersInstances(app) {
			ms = append(ms, unionMember{id: id, instance: true, reg: ir})
		}
		for _, m := range ms {
			err := m.reg.Register(ctx, url)
			if f := l.events.Registered; f != nil {
				f(err)
			}
			if err != nil {
				return fmt.Errorf("register %s in registries.%s (%s level): %w", service, id, m.level(), err)
			}
			r := &registration{service: service, registry: id, level: m.level(), reg: m.reg, url: url}
			r.on.Store(true)
			l.mu.Lock()
			l.registrations = append(l.registrations, r)
			l.mu.Unlock()
		}
	}
	return nil
}

// Registrations lists every registration of a service, in the order made.
func (l *Layer) Registrations() []Registration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Registration, len(l.registrations))
	for i, r := range l.registrations {
		out[i] = Registration{Service: r.service, Registry: r.registry, Level: r.level, URL: r.url, Registered: r.on.Load()}
	}
	return out
}

func (l *Layer) snapshot() []*registration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*registration(nil), l.registrations...)
}

// ErrNotRegistered is SetOnline's error when none of the services it was
// asked for is registered anywhere.
var ErrNotRegistered = errors.New("not registered")

// SetOnline registers (on) or unregisters the registrations of the services
// in ids, leaving them exported: QoS's online and offline. Offline
// consumers stop choosing this provider once their registry tells them, and
// the calls they already sent finish; online brings them back. A registry
// that fails leaves that registration as it was, and says so in the error.
// report is called for each registration changed.
func (l *Layer) SetOnline(ctx context.Context, ids map[string]bool, on bool, report func(service, registry string, url *kernel.URL)) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	verb, from := "unregister", "from"
	if on {
		verb, from = "register", "in"
	}
	if closed {
		return fmt.Errorf("cannot %s: the App is stopping and has left its registries for good", verb)
	}
	var errs []error
	found := false
	for _, r := range l.snapshot() {
		if !ids[r.service] {
			continue
		}
		found = true
		if r.on.Load() == on {
			continue
		}
		var err error
		if on {
			err = r.reg.Register(ctx, r.url)
		} else {
			err = r.reg.Unregister(ctx, r.url)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s %s registries.%s: %w (it stays as it was there; run the command again once the registry answers)",
				verb, r.url.String(), from, r.registry, err))
			continue
		}
		r.on.Store(on)
		if report != nil {
			report(r.service, r.registry, r.url)
		}
	}
	if !found {
		return ErrNotRegistered
	}
	return errors.Join(errs...)
}

// UnregisterAll takes every provider registration out of the registries,
// newest first, and refuses SetOnline from then on: the first step of a
// graceful stop, so that consumers stop choosing this provider while its
// servers still answer. Failures are logged: the registry's own expiry
// (a session, a heartbeat) removes what is left.
func (l *Layer) UnregisterAll(ctx context.Context) {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	l.closed = true
	regs := l.registrations
	l.registrations = nil
	l.mu.Unlock()
	for i := len(regs) - 1; i >= 0; i-- {
		r := regs[i]
		if !r.on.Swap(false) {
			continue
		}
		if err := r.reg.Unregister(ctx, r.url); err != nil {
			l.log.Warn("weft: unregister", "url", r.url.String(), "registry", r.registry, "err", err)
		}
	}
}

// Subscription is one reference's subscription in every registry: the
// registries' lists merged into the directory the cluster joins.
type Subscription struct {
	l        *Layer
	consumer *kernel.URL
	// unions: one that merges every registry's list, or one per registry
	// for a directory that keeps them apart (PerRegistry).
	unions []*union
	// registered: the consumer URL, per registry it was registered in.
	registered map[string]*kernel.URL
}

// Directory returns a directory for consumer (a reference's URL) whose
// providers, merged with the consumer's settings, are referred through
// refer, with routers. Subscribe (or Retarget) connects it to the
// registries.
func (l *Layer) Directory(ctx context.Context, consumer *kernel.URL, routers []extension.Router, refer Referrer) *cluster.RegistryDirectory {
	params := consumer.Params()
	delete(params, kernel.KeySide)
	delete(params, kernel.KeyTimestamp)
	delete(params, extension.KeyCategory)
	delete(params, KeyRegister)
	rd := cluster.NewRegistryDirectory(consumer, func(u *kernel.URL) (kernel.Invoker, error) {
		return refer(context.WithoutCancel(ctx), u)
	}, l.log)
	rd.SetMerge(func(pu *kernel.URL) *kernel.URL { return MergeURL(pu, params) })
	rd.SetRouters(routers)
	return rd
}

// Routers are the routers the registries that route (a mesh's,
// extension.RouterProvider) give consumer, in the order of their ids.
func (l *Layer) Routers(consumer *kernel.URL) ([]extension.Router, error) {
	var out []extension.Router
	for _, id := range l.ids {
		rp, ok := l.regs[id].(extension.RouterProvider)
		if !ok || l.noSubscribe[id] {
			continue
		}
		r, err := rp.Router(consumer)
		if err != nil {
			return nil, fmt.Errorf("registries.%s: %w", id, err)
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// PerRegistry is a directory that keeps each registry's providers apart
// (cluster.RegistriesDirectory, under the zone-aware cluster): Subscribe
// gives each registry's list to what Registry returns for its id, rather
// than merging the registries' lists into one.
type PerRegistry interface {
	extension.NotifyListener
	Registry(id string) extension.NotifyListener
}

// Subscribe subscribes consumer in every registry, their lists merged into
// dir, or each registry's list given to its own part of dir when dir is a
// PerRegistry. The consumer URL is registered in every registry (category
// consumers) unless it says register=false; a registry that does not keep
// consumers ignores it. On error nothing stays subscribed.
func (l *Layer) Subscribe(ctx context.Context, consumer *kernel.URL, dir extension.NotifyListener) (*Subscription, error) {
	step := firstOf(consumer.Param(KeyMigrationStep), l.migration)
	if err := CheckModes("", step); err != nil {
		return nil, err
	}
	s := &Subscription{l: l, consumer: consumer, registered: map[string]*kernel.URL{}}
	pr, apart := dir.(PerRegistry)
	newUnion := func(to extension.NotifyListener) *union {
		u := &union{dir: to, parts: map[string][]*kernel.URL{}, events: l.events, preferInstances: step == ApplicationFirst, starting: true}
		s.unions = append(s.unions, u)
		return u
	}
	var all *union
	for _, id := range l.ids {
		if l.noSubscribe[id] {
			continue
		}
		u := all
		if apart {
			to := pr.Registry(id)
			if to == nil {
				continue
			}
			u = newUnion(to)
		} else if u == nil {
			all = newUnion(dir)
			u = all
		}
		if reg := l.regs[id]; reg != nil && step != ForceApplication {
			u.members = append(u.members, unionMember{id: id, reg: reg})
		}
		if ir := l.insts[id]; ir != nil && step != ForceInterface {
			u.members = append(u.members, unionMember{id: id, instance: true, reg: ir})
		}
	}
	members := 0
	for _, u := range s.unions {
		members += len(u.members)
	}
	if members == 0 && len(l.ids) > 0 && len(l.noSubscribe) > 0 && allTrue(l.noSubscribe) {
		return nil, fmt.Errorf("every registry (%s) has subscribe: false: there is nowhere to find providers of %s; let one subscribe, or give the reference url:",
			strings.Join(l.ids, ", "), consumer.ServiceKey())
	}
	if members == 0 && len(l.ids) > 0 {
		level, other := "interface", ApplicationFirst
		if step == ForceApplication {
			level, other = "application", ForceInterface
		}
		return nil, fmt.Errorf("migration step %s: none of the registries (%s) has %s-level discovery; use %s or a registry that has",
			step, strings.Join(l.ids, ", "), level, other)
	}
	for _, u := range s.unions {
		for i, m := range u.members {
			err := m.reg.Subscribe(ctx, consumer, u.member(i))
			if f := l.events.Subscribed; f != nil {
				f(err)
			}
			if err != nil {
				s.close(ctx)
				return nil, fmt.Errorf("subscribe in registries.%s (%s level): %w", m.id, m.level(), err)
			}
			u.subscribed = append(u.subscribed, i)
		}
	}
	for _, u := range s.unions {
		u.start()
	}
	if consumer.ParamBool(KeyRegister, true) {
		cu := ConsumerURL(consumer)
		for _, id := range l.ids {
			if l.regs[id] == nil {
				continue
			}
			if err := l.regs[id].Register(ctx, cu); err != nil {
				// Dubbo logs and goes on: a consumer that cannot say it
				// exists still calls.
				l.log.Warn("weft: register consumer", "registry", id, "url", cu.String(), "err", err)
				continue
			}
			s.registered[id] = cu
		}
	}
	l.mu.Lock()
	l.subs = append(l.subs, s)
	l.mu.Unlock()
	return s, nil
}

// Retarget makes the subscription feed dir (a directory for the
// reference's new settings, after a config-center change), starting with
// the providers known now: no new subscription, and the new directory is
// never empty while the old one was not. The caller destroys the old
// directory's invoker once its calls are done. A subscription that kept
// its registries apart feeds each registry's part of dir (PerRegistry).
func (s *Subscription) Retarget(dir extension.NotifyListener) {
	pr, apart := dir.(PerRegistry)
	for _, u := range s.unions {
		to := dir
		if apart && len(u.members) > 0 {
			if to = pr.Registry(u.members[0].id); to == nil {
				continue
			}
		}
		u.retarget(to)
	}
}

// Close unsubscribes from every registry and unregisters the consumer URL.
func (s *Subscription) Close(ctx context.Context) {
	s.close(ctx)
	l := s.l
	l.mu.Lock()
	for i, x := range l.subs {
		if x == s {
			l.subs = append(l.subs[:i], l.subs[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
}

func (s *Subscription) close(ctx context.Context) {
	for _, u := range s.unions {
		for _, i := range u.subscribed {
			m := u.members[i]
			if err := m.reg.Unsubscribe(ctx, s.consumer, u.member(i)); err != nil {
				s.l.log.Warn("weft: unsubscribe", "registry", m.id, "level", m.level(), "service", s.consumer.ServiceKey(), "err", err)
			}
		}
		u.subscribed = nil
	}
	for id, cu := range s.registered {
		if err := s.l.regs[id].Unregister(ctx, cu); err != nil {
			s.l.log.Warn("weft: unregister consumer", "registry", id, "url", cu.String(), "err", err)
		}
	}
	s.registered = map[string]*kernel.URL{}
}

// Close ends every subscription still open and closes the registries. Call
// it after UnregisterAll and once the references are destroyed.
func (l *Layer) Close(ctx context.Context) {
	l.mu.Lock()
	l.closed = true
	subs := l.subs
	l.subs = nil
	l.mu.Unlock()
	for _, s := range subs {
		s.close(ctx)
	}
	l.closeRegistries()
}

func (l *Layer) closeRegistries() {
	for _, id := range l.ids {
		if reg, ok := l.regs[id]; ok {
			if err := reg.Close(); err != nil {
				l.log.Warn("weft: close registry", "registry", id, "err", err)
			}
		}
		if ir, ok := l.insts[id]; ok {
			if err := ir.Close(); err != nil {
				l.log.Warn("weft: close application-level discovery", "registry", id, "err", err)
			}
		}
	}
	l.regs = map[string]extension.Registry{}
	l.insts = map[string]*instanceRegistry{}
}

// KeyRemoteApplication on a merged provider URL is the provider's own
// application, which the consumer's application replaces (Dubbo's
// remote.application): tag rules and override rules are looked up by it.
const KeyRemoteApplication = "remote.application"

// MergeURL lays the consumer's parameters over a provider URL, as Dubbo's
// ClusterUtils.mergeUrl does: the consumer decides timeouts, retries, load
// balancing and its filters; the provider's application stays as
// remote.application, and its dubbo.tag stays its own (the consumer's tag
// says which providers it wants, not what they are: Java drops TAG_KEY
// from the consumer's side of the merge).
func MergeURL(provider *kernel.URL, consumer map[string]string) *kernel.URL {
	app := provider.Param(kernel.KeyApplication)
	setApp := app != "" && consumer[kernel.KeyApplication] != "" && consumer[KeyRemoteApplication] == ""
	if _, tagged := consumer[cluster.KeyTag]; setApp || tagged {
		merged := make(map[string]string, len(consumer)+1)
		for k, v := range consumer {
			merged[k] = v
		}
		if setApp {
			merged[KeyRemoteApplication] = app
		}
		delete(merged, cluster.KeyTag)
		consumer = merged
	}
	return provider.WithParams(consumer)
}

// ConsumerURL is the URL Dubbo registers for a reference:
// consumer://<host>/<interface>?category=consumers&side=consumer&...
func ConsumerURL(ref *kernel.URL) *kernel.URL {
	u := ref.WithAddress("consumer", ref.Host, 0)
	return u.WithParams(map[string]string{extension.KeyCategory: extension.CategoryConsumers, kernel.KeySide: kernel.SideConsumer})
}

// union merges the full lists of several registries into one for the
// directory: each member's notification replaces only its own part. With
// APPLICATION_FIRST (preferInstances) the application-level parts win
// whenever they list any provider, and the interface-level ones are the
// fallback, as Dubbo's MigrationInvoker does.
//
// The members' first lists, which each gives as it subscribes, make the
// directory's first list together (starting): as Dubbo's MigrationInvoker
// waits for both levels before it chooses one, so that a consumer does not
// take the interface level's list for the few milliseconds the instances'
// metadata takes, then drop the providers only that level lists.
//
// One provider listed by both levels is one registration seen twice, with
// two URLs: the application-level one is built from the metadata, which
// leaves out the registration's volatile parameters (its timestamp). The
// directory knows an invoker by its URL, so the union gives it the URL it
// gave before for a registration it lists again (last): otherwise, when
// the list changes level (a stopping provider's instance leaves before its
// interface-level URL, and the consumer falls back to the interface level,
// or the other way round), the directory would drop each provider and
// refer it again, and warn of drops that no registry made.
type union struct {
	mu              sync.Mutex
	dir             extension.NotifyListener
	members         []unionMember
	parts           map[string][]*kernel.URL
	events          Events
	preferInstances bool
	subscribed      []int         // members subscribed in, for Close
	starting        bool          // Subscribe has not subscribed every member yet
	last            []*kernel.URL // the last list given, not empty (list)
}

// unionMember is one registry at one level.
type unionMember struct {
	id       string
	instance bool
	reg      extension.Registry
}

func (m unionMember) level() string {
	if m.instance {
		return RegisterInstance
	}
	return RegisterInterface
}

func (m unionMember) key() string { return m.id + "/" + m.level() }

type member struct {
	u *union
	i int
}

func (u *union) member(i int) extension.NotifyListener { return member{u, i} }

func (m member) Notify(urls []*kernel.URL) {
	m.u.mu.Lock()
	defer m.u.mu.Unlock()
	m.u.parts[m.u.members[m.i].key()] = urls
	if !m.u.starting {
		m.u.notify()
	}
}

// start ends starting: the directory gets the members' first lists, merged.
func (u *union) start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.starting = false
	if len(u.parts) > 0 {
		u.notify()
	}
}

func (u *union) notify() {
	all := u.list()
	if f := u.events.Notified; f != nil {
		f(len(all))
	}
	u.dir.Notify(all)
}

// list is all, each registration listed before under the URL it had then
// (sameRegistration), and remembered as the last list. An empty list is not
// remembered: the directory keeps its providers through one (empty
// protection), under the URLs they had.
func (u *union) list() []*kernel.URL {
	all := u.all()
	if len(all) == 0 {
		return all
	}
	if len(u.last) > 0 {
		before := make(map[string][]*kernel.URL, len(u.last))
		for _, p := range u.last {
			k := registrationKey(p)
			before[k] = append(before[k], p)
		}
		stable := make([]*kernel.URL, len(all))
		for i, x := range all {
			stable[i] = x
			for _, p := range before[registrationKey(x)] {
				if sameRegistration(p, x) {
					stable[i] = p
					break
				}
			}
		}
		all = stable
	}
	u.last = all
	return all
}

// registrationKey is a provider URL without the parameters that the
// application-level metadata leaves out (volatileParamNames).
func registrationKey(u *kernel.URL) string {
	for _, k := range volatileParamNames {
		if _, ok := u.Lookup(k); ok {
			return u.WithoutParams(volatileParamNames...).String()
		}
	}
	return u.String()
}

// sameRegistration reports whether a and b, of equal registrationKey, are
// one registration: every volatile parameter both carry is equal. A
// provider restarted at the same address registers anew (a new
// timestamp): that is another registration, referred again.
func sameRegistration(a, b *kernel.URL) bool {
	for _, k := range volatileParamNames {
		av, aok := a.Lookup(k)
		bv, bok := b.Lookup(k)
		if aok && bok && av != bv {
			return false
		}
	}
	return true
}

func (u *union) all() []*kernel.URL {
	var inst, iface []*kernel.URL
	for _, m := range u.members {
		if m.instance {
			inst = append(inst, u.parts[m.key()]...)
		} else {
			iface = append(iface, u.parts[m.key()]...)
		}
	}
	if u.preferInstances && len(inst) > 0 {
		return inst
	}
	return append(iface, inst...)
}

func (u *union) retarget(dir extension.NotifyListener) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dir = dir
	if len(u.parts) > 0 {
		dir.Notify(u.list())
	}
}

// String names the subscription, for logs.
func (s *Subscription) String() string {
	return s.consumer.ServiceKey() + " in " + strings.Join(s.l.ids, ",")
}

func allTrue(m map[string]bool) bool {
	for _, v := range m {
		if !v {
			return false
		}
	}
	return true
}
