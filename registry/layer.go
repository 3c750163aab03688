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
	regs   map[string]extension.Registry

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
	reg      extension.Registry
	url      *kernel.URL
	on       atomic.Bool // registered now: false after offline or stop
}

// Registration describes one (service, registry) registration.
type Registration struct {
	Service, Registry string
	URL               *kernel.URL
	// Registered is false once QoS took it offline (or the App stopped).
	Registered bool
}

// Open opens a registry for each address, by its URL's protocol, from
// factories. ids are the App's names of the registries (registries.<id>).
// On error the registries opened so far are closed.
func Open(addrs map[string]*kernel.URL, factories *kernel.Loader[extension.RegistryFactory], log *slog.Logger, ev Events) (*Layer, error) {
	l := &Layer{log: log, events: ev, regs: map[string]extension.Registry{}}
	for id := range addrs {
		l.ids = append(l.ids, id)
	}
	sort.Strings(l.ids)
	for _, id := range l.ids {
		u := addrs[id]
		f, err := factories.Get(u.Protocol)
		if err == nil {
			var reg extension.Registry
			if reg, err = f.GetRegistry(u); err == nil {
				l.regs[id] = reg
				continue
			}
		}
		l.closeRegistries()
		return nil, fmt.Errorf("registries.%s (%s): %w", id, u, err)
	}
	return l, nil
}

// Empty reports whether the App has no registries.
func (l *Layer) Empty() bool { return len(l.ids) == 0 }

// IDs returns the registries' ids, sorted.
func (l *Layer) IDs() []string { return append([]string(nil), l.ids...) }

// Register publishes the exported URL of service in every registry. url
// must carry the address the server really listens on. A service whose
// URL says register=false is exported but not registered.
func (l *Layer) Register(ctx context.Context, service string, url *kernel.URL) error {
	if !url.ParamBool(KeyRegister, true) {
		return nil
	}
	for _, id := range l.ids {
		reg := l.regs[id]
		err := reg.Register(ctx, url)
		if f := l.events.Registered; f != nil {
			f(err)
		}
		if err != nil {
			return fmt.Errorf("register %s in registries.%s: %w", service, id, err)
		}
		r := &registration{service: service, registry: id, reg: reg, url: url}
		r.on.Store(true)
		l.mu.Lock()
		l.registrations = append(l.registrations, r)
		l.mu.Unlock()
	}
	return nil
}

// Registrations lists every registration of a service, in the order made.
func (l *Layer) Registrations() []Registration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Registration, len(l.registrations))
	for i, r := range l.registrations {
		out[i] = Registration{Service: r.service, Registry: r.registry, URL: r.url, Registered: r.on.Load()}
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
	union    *union
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
	rd := cluster.NewRegistryDirectory(consumer, func(pu *kernel.URL) (kernel.Invoker, error) {
		return refer(context.WithoutCancel(ctx), MergeURL(pu, params))
	}, l.log)
	rd.SetRouters(routers)
	return rd
}

// Subscribe subscribes consumer in every registry, their lists merged into
// dir. The consumer URL is registered in every registry (category
// consumers) unless it says register=false; a registry that does not keep
// consumers ignores it. On error nothing stays subscribed.
func (l *Layer) Subscribe(ctx context.Context, consumer *kernel.URL, dir extension.NotifyListener) (*Subscription, error) {
	s := &Subscription{l: l, consumer: consumer, registered: map[string]*kernel.URL{}}
	s.union = &union{dir: dir, parts: map[string][]*kernel.URL{}, events: l.events}
	for _, id := range l.ids {
		err := l.regs[id].Subscribe(ctx, consumer, s.union.member(id))
		if f := l.events.Subscribed; f != nil {
			f(err)
		}
		if err != nil {
			s.close(ctx)
			return nil, fmt.Errorf("subscribe in registries.%s: %w", id, err)
		}
		s.union.subscribed = append(s.union.subscribed, id)
	}
	if consumer.ParamBool(KeyRegister, true) {
		cu := ConsumerURL(consumer)
		for _, id := range l.ids {
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
// directory's invoker once its calls are done.
func (s *Subscription) Retarget(dir extension.NotifyListener) { s.union.retarget(dir) }

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
	for _, id := range s.union.subscribed {
		if err := s.l.regs[id].Unsubscribe(ctx, s.consumer, s.union.member(id)); err != nil {
			s.l.log.Warn("weft: unsubscribe", "registry", id, "service", s.consumer.ServiceKey(), "err", err)
		}
	}
	s.union.subscribed = nil
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
		reg, ok := l.regs[id]
		if !ok {
			continue
		}
		if err := reg.Close(); err != nil {
			l.log.Warn("weft: close registry", "registry", id, "err", err)
		}
	}
	l.regs = map[string]extension.Registry{}
}

// MergeURL lays the consumer's parameters over a provider URL, as Dubbo's
// ClusterUtils.mergeUrl does: the consumer decides timeouts, retries, load
// balancing and its filters.
func MergeURL(provider *kernel.URL, consumer map[string]string) *kernel.URL {
	return provider.WithParams(consumer)
}

// ConsumerURL is the URL Dubbo registers for a reference:
// consumer://<host>/<interface>?category=consumers&side=consumer&...
func ConsumerURL(ref *kernel.URL) *kernel.URL {
	u := ref.WithAddress("consumer", ref.Host, 0)
	return u.WithParams(map[string]string{extension.KeyCategory: extension.CategoryConsumers, kernel.KeySide: kernel.SideConsumer})
}

// union merges the full lists of several registries into one for the
// directory: each registry's notification replaces only its own part.
type union struct {
	mu         sync.Mutex
	dir        extension.NotifyListener
	parts      map[string][]*kernel.URL
	events     Events
	subscribed []string // registries subscribed in, for Close
}

type member struct {
	u  *union
	id string
}

func (u *union) member(id string) extension.NotifyListener { return member{u, id} }

func (m member) Notify(urls []*kernel.URL) {
	m.u.mu.Lock()
	defer m.u.mu.Unlock()
	m.u.parts[m.id] = urls
	all := m.u.all()
	if f := m.u.events.Notified; f != nil {
		f(len(all))
	}
	m.u.dir.Notify(all)
}

func (u *union) all() []*kernel.URL {
	ids := make([]string, 0, len(u.parts))
	for id := range u.parts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var all []*kernel.URL
	for _, id := range ids {
		all = append(all, u.parts[id]...)
	}
	return all
}

func (u *union) retarget(dir extension.NotifyListener) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dir = dir
	if len(u.parts) > 0 {
		dir.Notify(u.all())
	}
}

// String names the subscription, for logs.
func (s *Subscription) String() string {
	return s.consumer.ServiceKey() + " in " + strings.Join(s.l.ids, ",")
}
