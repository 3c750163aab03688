package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// MetadataFetcher asks an instance's MetadataService for the metadata of
// revision (getMetadataInfo). u is the service's URL, built from the
// instance's dubbo.metadata-service.url-params. The App provides it (it
// refers a protocol's invoker); it must give up within its context.
type MetadataFetcher func(ctx context.Context, u *kernel.URL, revision string) (*MetadataInfo, error)

// fetchTimeout bounds one getMetadataInfo call, as dubbo-go's 5 s.
const fetchTimeout = 5 * time.Second

// Mapping re-reads: a consumer whose interface has no application mapped
// yet (its providers have not started) looks again every mappingRetry;
// once mapped, every mappingRefresh, to find applications added later.
const (
	mappingRetry   = 2 * time.Second
	mappingRefresh = 30 * time.Second
)

// Metadata retries: the instances of a revision whose metadata could not be
// read (its MetadataService timed out, or did not serve that revision yet)
// are asked again after metadataRetry, doubling up to metadataRetryMax, as
// Java's ServiceInstancesChangedListener retries them (its
// AddressRefreshRetryTask, every 10 s), and not only at the application's
// next change, which may never come.
const (
	metadataRetry    = time.Second
	metadataRetryMax = 10 * time.Second
)

// instanceRegistry is application-level service discovery behind the
// Registry interface (Dubbo's ServiceDiscoveryRegistry), so that the layer
// registers, subscribes and unions it like any registry:
//
//   - Register of a provider URL adds the service to the application's
//     metadata, maps its interface to the application, and registers (or
//     updates) the one instance with the new revision; Unregister takes
//     the service out and unregisters the instance with the last one.
//   - Subscribe of a consumer URL resolves interface → applications (the
//     reference's provided-by, or the mapping) → their instances →
//     each revision's metadata (fetched once per revision from an instance's
//     MetadataService, cached) → provider URLs, and notifies the full list
//     after every change.
type instanceRegistry struct {
	sd    extension.ServiceDiscovery
	app   string
	log   *slog.Logger
	fetch MetadataFetcher
	// metadataURL is where this App's MetadataService answers (its
	// protocol and port go into the instance's metadata); nil: not
	// exported, the App registers no instance.
	metadataURL func() *kernel.URL

	mu       sync.Mutex
	services map[string]*ServiceInfo // match key -> info
	exported []*kernel.URL           // in registration order: the first gives the instance's address
	instance *extension.ServiceInstance
	md       *MetadataInfo // the current revision's metadata, served by the MetadataService

	cacheMu sync.Mutex
	cache   map[string]*MetadataInfo // app + "\x00" + revision -> metadata

	subsMu sync.Mutex
	subs   map[extension.NotifyListener]*appSubscription
	closed chan struct{}
}

func newInstanceRegistry(sd extension.ServiceDiscovery, app string, fetch MetadataFetcher, metadataURL func() *kernel.URL, log *slog.Logger) *instanceRegistry {
	return &instanceRegistry{sd: sd, app: app, fetch: fetch, metadataURL: metadataURL, log: log,
		services: map[string]*ServiceInfo{}, cache: map[string]*MetadataInfo{},
		subs: map[extension.NotifyListener]*appSubscription{}, closed: make(chan struct{})}
}

var _ extension.Registry = (*instanceRegistry)(nil)

// Register adds a provider's service to the application's instance.
// Consumer URLs are not registered at application level (Dubbo neither).
func (r *instanceRegistry) Register(ctx context.Context, u *kernel.URL) error {
	if extension.IsConsumer(u) {
		return nil
	}
	if err := r.sd.AddMapping(ctx, u.Interface(), r.app); err != nil {
		return fmt.Errorf("map %s to application %s: %w", u.Interface(), r.app, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	si := serviceInfo(u)
	r.services[si.MatchKey()] = si
	r.exported = append(r.exported, u)
	return r.publishLocked(ctx)
}

// Unregister takes a provider's service out of the instance's metadata;
// the instance leaves with its last service.
func (r *instanceRegistry) Unregister(ctx context.Context, u *kernel.URL) error {
	if extension.IsConsumer(u) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.services, serviceInfo(u).MatchKey())
	for i, e := range r.exported {
		if e.String() == u.String() {
			r.exported = append(r.exported[:i], r.exported[i+1:]...)
			break
		}
	}
	return r.publishLocked(ctx)
}

// publishLocked registers the instance for the services now, or
// unregisters it when there are none.
func (r *instanceRegistry) publishLocked(ctx context.Context) error {
	if len(r.services) == 0 {
		r.md = nil
		if r.instance == nil {
			return nil
		}
		in := *r.instance
		r.instance = nil
		return r.sd.Unregister(ctx, in)
	}
	services := make(map[string]*ServiceInfo, len(r.services))
	for k, v := range r.services {
		services[k] = v
	}
	rev := revision(r.app, services)
	r.md = &MetadataInfo{App: r.app, Revision: rev, Services: services}
	in := r.instanceLocked(rev)
	if err := r.sd.Register(ctx, in); err != nil {
		return err
	}
	r.instance = &in
	return nil
}

// instanceLocked describes this App's instance: the address of its first
// export, each protocol's port (dubbo.endpoints), the revision, and where
// its MetadataService answers.
func (r *instanceRegistry) instanceLocked(rev string) extension.ServiceInstance {
	first := r.exported[0]
	ports := map[string]int{}
	for _, u := range r.exported {
		if _, ok := ports[u.Protocol]; !ok {
			ports[u.Protocol] = u.Port
		}
	}
	eps := make([]endpoint, 0, len(ports))
	for p, port := range ports {
		eps = append(eps, endpoint{Port: port, Protocol: p})
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].Protocol < eps[j].Protocol })
	epJSON, _ := json.Marshal(eps)
	meta := map[string]string{
		MetaRevision:    rev,
		MetaStorageType: StorageLocal,
		MetaEndpoints:   string(epJSON),
		MetaVersion:     MetadataServiceVersion,
	}
	if mu := r.metadataURL(); mu != nil {
		ps := map[string]string{
			keyProtocol: mu.Protocol, "port": strconv.Itoa(mu.Port),
			kernel.KeyVersion: MetadataServiceVersion, "dubbo": "2.0.2", "serialization": "hessian2",
		}
		b, _ := json.Marshal(ps)
		meta[MetaServiceURL] = string(b)
	}
	return extension.ServiceInstance{App: r.app, Host: first.Host, Port: first.Port, Metadata: meta}
}

// Metadata is the metadata of revision, as this App's MetadataService
// answers getMetadataInfo; nil for any other revision (Java answers
// null too: the consumer fetches again once it sees the new revision).
func (r *instanceRegistry) Metadata(rev string) *MetadataInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.md == nil || (rev != "" && rev != r.md.Revision) {
		return nil
	}
	return r.md
}

// appSubscription is one reference's application-level subscription: the
// applications it watches, their instances, and the listener it feeds.
type appSubscription struct {
	r        *instanceRegistry
	consumer *kernel.URL
	listener extension.NotifyListener
	fixed    bool // provided-by: the applications are the reference's, not the mapping's

	mu   sync.Mutex
	apps map[string][]extension.ServiceInstance // watched app -> its instances
	stop chan struct{}
	done chan struct{} // closed when remap has returned

	// retry delivers again while a revision's metadata is missing
	// (metadataRetry); retryWait is its next wait, 0 after a whole delivery.
	retry     *time.Timer
	retryWait time.Duration
}

// Subscribe watches the applications that provide consumer's interface.
func (r *instanceRegistry) Subscribe(ctx context.Context, consumer *kernel.URL, l extension.NotifyListener) error {
	s := &appSubscription{r: r, consumer: consumer, listener: l, apps: map[string][]extension.ServiceInstance{},
		stop: make(chan struct{}), done: make(chan struct{})}
	var apps []string
	if pb := consumer.Param(KeyProvidedBy); pb != "" {
		s.fixed = true
		for _, a := range strings.Split(pb, ",") {
			if a = strings.TrimSpace(a); a != "" {
				apps = append(apps, a)
			}
		}
	} else {
		var err error
		if apps, err = r.sd.Mapping(ctx, consumer.Interface()); err != nil {
			return fmt.Errorf("read the applications of %s (the mapping): %w", consumer.Interface(), err)
		}
	}
	if err := s.watch(ctx, apps); err != nil {
		s.close(ctx)
		close(s.done)
		return err
	}
	r.subsMu.Lock()
	r.subs[l] = s
	r.subsMu.Unlock()
	if len(apps) == 0 {
		r.log.Info("weft: no application is mapped to the interface yet; watching for one", "interface", consumer.Interface())
		s.deliver()
	}
	go s.remap()
	return nil
}

// watch subscribes to the applications not watched yet.
func (s *appSubscription) watch(ctx context.Context, apps []string) error {
	for _, app := range apps {
		s.mu.Lock()
		_, ok := s.apps[app]
		if !ok {
			s.apps[app] = nil
		}
		s.mu.Unlock()
		if ok {
			continue
		}
		if err := s.r.sd.Subscribe(ctx, app, s); err != nil {
			return fmt.Errorf("subscribe to the instances of application %s: %w", app, err)
		}
	}
	return nil
}

// remap reads the mapping again now and then: applications mapped later
// (a provider of another application started) are watched too.
func (s *appSubscription) remap() {
	defer close(s.done)
	if s.fixed {
		<-s.stop
		return
	}
	for {
		s.mu.Lock()
		wait := mappingRefresh
		if len(s.apps) == 0 {
			wait = mappingRetry
		}
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		apps, err := s.r.sd.Mapping(ctx, s.consumer.Interface())
		if err == nil {
			err = s.watch(ctx, apps)
		}
		cancel()
		if err != nil {
			s.r.log.Warn("weft: application-level discovery: reading the mapping again", "interface", s.consumer.Interface(), "err", err)
		}
	}
}

// NotifyInstances receives an application's instances.
func (s *appSubscription) NotifyInstances(app string, instances []extension.ServiceInstance) {
	s.mu.Lock()
	if _, ok := s.apps[app]; !ok {
		s.mu.Unlock()
		return
	}
	s.apps[app] = instances
	s.mu.Unlock()
	s.deliver()
}

// deliver builds the provider URLs of every watched instance and notifies
// them. An instance whose metadata cannot be fetched is left out (and
// logged); it comes in at the next change.
func (s *appSubscription) deliver() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return // closed: a retry that fired as it closed
	default:
	}
	missing := false
	var protocols []string
	if p := s.consumer.Param("protocols"); p != "" {
		protocols = strings.Split(p, ",")
	}
	var urls []*kernel.URL
	apps := make([]string, 0, len(s.apps))
	for a := range s.apps {
		apps = append(apps, a)
	}
	sort.Strings(apps)
	for _, app := range apps {
		byRev := map[string][]extension.ServiceInstance{}
		var revs []string
		for _, in := range s.apps[app] {
			rev := in.Metadata[MetaRevision]
			if _, ok := byRev[rev]; !ok {
				revs = append(revs, rev)
			}
			byRev[rev] = append(byRev[rev], in)
		}
		sort.Strings(revs)
		s.r.forget(app, revs)
		for _, rev := range revs {
			md := s.r.metadata(app, rev, byRev[rev])
			if md == nil {
				missing = true
				continue
			}
			for _, in := range byRev[rev] {
				urls = append(urls, providerURLs(in, md, s.consumer, protocols)...)
			}
		}
	}
	s.listener.Notify(urls)
	s.retryLocked(missing)
}

// retryLocked schedules the next delivery while metadata is missing, and
// stops retrying once none is.
func (s *appSubscription) retryLocked(missing bool) {
	if !missing {
		s.retryWait = 0
		if s.retry != nil {
			s.retry.Stop()
		}
		return
	}
	s.retryWait = min(max(2*s.retryWait, metadataRetry), metadataRetryMax)
	if s.retry == nil {
		s.retry = time.AfterFunc(s.retryWait, s.deliver)
	} else {
		s.retry.Reset(s.retryWait)
	}
}

// metadata returns the metadata of app's revision: from the cache, else
// from the MetadataService of one of its instances (the next one when one
// fails).
func (r *instanceRegistry) metadata(app, rev string, instances []extension.ServiceInstance) *MetadataInfo {
	key := app + "\x00" + rev
	r.cacheMu.Lock()
	md, ok := r.cache[key]
	r.cacheMu.Unlock()
	if ok {
		return md
	}
	var errs []error
	for i, in := range instances {
		if i == 3 {
			break // a bound: the others serve the same revision
		}
		u, err := metadataServiceURL(in)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
			md, err = r.fetch(ctx, u, rev)
			cancel()
			if err == nil {
				err = checkMetadata(md, app, rev)
			}
		}
		if err == nil {
			r.cacheMu.Lock()
			r.cache[key] = md
			r.cacheMu.Unlock()
			return md
		}
		errs = append(errs, fmt.Errorf("instance %s: %w", in.ID(), err))
	}
	r.log.Warn("weft: application-level discovery: cannot read an application's metadata; its instances of that revision are left out, and asked again within 10 s or at its next change",
		"application", app, "revision", clip(rev), "err", errors.Join(errs...))
	return nil
}

// forget drops the cached metadata of app's revisions no instance serves
// any more: each restart or change of a provider makes a new revision, and
// the cache must not grow with them.
func (r *instanceRegistry) forget(app string, live []string) {
	prefix := app + "\x00"
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	for key := range r.cache {
		if rev, ok := strings.CutPrefix(key, prefix); ok && !contains(live, rev) {
			delete(r.cache, key)
		}
	}
}

// Unsubscribe stops the subscription of l.
func (r *instanceRegistry) Unsubscribe(ctx context.Context, _ *kernel.URL, l extension.NotifyListener) error {
	r.subsMu.Lock()
	s := r.subs[l]
	delete(r.subs, l)
	r.subsMu.Unlock()
	if s != nil {
		s.close(ctx)
		<-s.done
	}
	return nil
}

func (s *appSubscription) close(ctx context.Context) {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.mu.Lock()
	if s.retry != nil {
		s.retry.Stop()
	}
	apps := make([]string, 0, len(s.apps))
	for a := range s.apps {
		apps = append(apps, a)
	}
	s.mu.Unlock()
	for _, app := range apps {
		if err := s.r.sd.Unsubscribe(ctx, app, s); err != nil {
			s.r.log.Warn("weft: unsubscribe application", "application", app, "err", err)
		}
	}
}

// Close ends every subscription, unregisters the instance and closes the
// discovery.
func (r *instanceRegistry) Close() error {
	r.subsMu.Lock()
	subs := r.subs
	r.subs = map[extension.NotifyListener]*appSubscription{}
	r.subsMu.Unlock()
	for _, s := range subs {
		s.close(context.Background())
		<-s.done
	}
	r.mu.Lock()
	if r.instance != nil {
		if err := r.sd.Unregister(context.Background(), *r.instance); err != nil {
			r.log.Warn("weft: unregister instance", "application", r.app, "err", err)
		}
		r.instance = nil
	}
	r.mu.Unlock()
	return r.sd.Close()
}
