package xds

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the registry's protocol: `registries.mesh.address:
// xds://istiod:15010`, or `xds://?bootstrap=/etc/istio/proxy/grpc-bootstrap.json`
// (or with neither, GRPC_XDS_BOOTSTRAP's file, as grpc-go).
const Name = "xds"

// Keys of a reference's params that say what it calls in the mesh.
const (
	// KeyListener names the reference's client listener: the service's
	// host and port in the mesh ("echo.default.svc.cluster.local:7070",
	// gRPC's xds:/// target), formatted by the bootstrap's
	// client_default_listener_resource_name_template. Without it,
	// `provided-by` is taken.
	KeyListener = "xds.listener"
	// KeyBootstrap is the registry address's bootstrap file parameter.
	KeyBootstrap = "bootstrap"
	// KeyDelta on the registry address asks for the incremental protocol
	// (delta xDS) rather than the state of the world.
	KeyDelta = "delta"
	// KeyNode is the registry address's node id when it names the server
	// itself (default: weft~<ip>~<hostname>~default.svc.cluster.local,
	// Istio's sidecar form).
	KeyNode = "node"
	// Parameters of the provider URLs the registry lists.
	KeyCluster  = "xds.cluster"
	KeyLocality = "xds.locality"
)

// Factory opens xDS registries; Log hears of the stream and of NACKs.
type Factory struct{ Log *slog.Logger }

// GetRegistry returns the registry of u.
func (f Factory) GetRegistry(u *kernel.URL) (extension.Registry, error) {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	b, err := bootstrapOf(u)
	if err != nil {
		return nil, err
	}
	srv := b.Servers[0]
	srv.Delta = u.ParamBool(KeyDelta, false)
	c, err := newClient(srv, b.Node, b.CertificateProviders, log)
	if err != nil {
		return nil, err
	}
	return &Registry{c: c, b: b, log: log, subs: map[extension.NotifyListener]*subscription{}, hosts: map[string]*atomic.Pointer[routeState]{}}, nil
}

// bootstrapOf is the registry address's bootstrap: its bootstrap file, or
// the server it names, or the environment's (grpc-go's variables).
func bootstrapOf(u *kernel.URL) (*Bootstrap, error) {
	if path := u.Param(KeyBootstrap); path != "" {
		return ReadBootstrap(path)
	}
	if u.Host != "" {
		id := u.Param(KeyNode)
		if id == "" {
			host, _ := os.Hostname()
			id = "weft~" + localIP() + "~" + host + "~default.svc.cluster.local"
		}
		return &Bootstrap{Servers: []Server{{URI: u.Address(), Creds: "insecure"}}, Node: Node{ID: id}, ClientListenerTemplate: "%s"}, nil
	}
	b, ok, err := BootstrapFromEnv()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("xds registry %s names no management server: give it as xds://host:port, a bootstrap file as xds://?bootstrap=/path, or set %s", u.String(), EnvBootstrap)
	}
	return b, nil
}

func localIP() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// Registry is the mesh as a registry: a reference's providers are the
// endpoints of the clusters its listener's routes name. Providers are not
// registered: the mesh's platform lists them (Kubernetes endpoints).
type Registry struct {
	c   *Client
	b   *Bootstrap
	log *slog.Logger

	mu   sync.Mutex
	subs map[extension.NotifyListener]*subscription
	// hosts are the routes in force per target, which the
	// subscriptions set when a route configuration comes and the routers
	// read on every call.
	hosts map[string]*atomic.Pointer[routeState]
	// faults counts the calls faulted now, for max_active_faults.
	faults atomic.Int64
}

// routeState is a target's virtual host (nil: none matched the target)
// in the last route configuration taken, with the call policy of each
// route and cluster (policies[route][cluster], nil: none) made once; a nil
// *routeState is none yet.
type routeState struct {
	vh       *VirtualHost
	policies [][]*extension.CallPolicy
}

// clusterPolicy is what a cluster adds to a call's policy: its load
// balancer and its max_requests admission (nil: none known yet).
type clusterPolicy struct {
	lb    string
	admit func() (func(), error)
}

// newRouteState is vh's routes in force under a listener whose default
// timeout is msd: each route's timeout (A31: the route's, else the
// listener's) and retry policy (A44: the route's, else the virtual
// host's), with each of its clusters' load balancer and admission
// (clusters gives them by name), as the cluster applies them.
//
// A call's faults (A33) are the listener's fault filters, in order, each
// replaced by the first override of the weighted cluster, the route or
// the virtual host; active counts the calls faulted now.
func newRouteState(vh *VirtualHost, msd time.Duration, clusters func(name string) clusterPolicy, filters []HTTPFilter, active *atomic.Int64) *routeState {
	st := &routeState{vh: vh}
	if vh == nil {
		return st
	}
	st.policies = make([][]*extension.CallPolicy, len(vh.Routes))
	for i := range vh.Routes {
		r := &vh.Routes[i]
		timeout := msd
		if r.HasTimeout {
			timeout = r.Timeout
		}
		rc := r.Retry
		if rc == nil {
			rc = vh.Retry
		}
		retry := rc.policy()
		st.policies[i] = make([]*extension.CallPolicy, len(r.Clusters))
		for k, wc := range r.Clusters {
			var cp clusterPolicy
			if clusters != nil {
				cp = clusters(wc.Name)
			}
			var inject func(context.Context, *kernel.Invocation) (bool, error)
			if faults := callFaults(filters, vh, r, &wc); len(faults) > 0 {
				inject = injector(faults, active)
			}
			if timeout == 0 && retry == nil && cp.lb == "" && cp.admit == nil && inject == nil {
				continue
			}
			st.policies[i][k] = &extension.CallPolicy{Timeout: timeout, Retry: retry, LoadBalance: cp.lb, Admit: cp.admit, Inject: inject}
		}
	}
	return st
}

// callFaults are the fault configs a call to wc by route r of vh meets.
func callFaults(filters []HTTPFilter, vh *VirtualHost, r *Route, wc *WeightedCluster) []*Fault {
	var out []*Fault
	for _, f := range filters {
		cfg := f.Fault
		if o, ok := wc.Faults[f.Name]; ok {
			cfg = o
		} else if o, ok := r.Faults[f.Name]; ok {
			cfg = o
		} else if o, ok := vh.Faults[f.Name]; ok {
			cfg = o
		}
		if cfg.active() {
			out = append(out, cfg)
		}
	}
	return out
}

// admission is gRPC's max_requests for the cluster service (A32): calls
// in flight beyond max are refused, counted in n (kept across updates).
func admission(service string, max uint32, n *atomic.Int64) func() (func(), error) {
	release := func() { n.Add(-1) }
	return func() (func(), error) {
		if n.Add(1) > int64(max) {
			n.Add(-1)
			// gRPC fails these with UNAVAILABLE; weft says what it is,
			// a limit (RESOURCE_EXHAUSTED to a gRPC peer).
			return nil, kernel.Errorf(kernel.CodeLimitExceeded, "max requests %v exceeded on service %v", max, service)
		}
		return release, nil
	}
}

// maxAttempts is gRPC's bound on a call's attempts, whatever a retry
// policy says.
const maxAttempts = 5

// policy is the cluster's form of c: the statuses retried are gRPC's, of
// the failure's weft code (kernel.GRPCStatus), as a gRPC client sees them.
func (c *RetryConfig) policy() *extension.RetryPolicy {
	if c == nil {
		return nil
	}
	on := c.On
	return &extension.RetryPolicy{
		Retries:     int(min(c.NumRetries, maxAttempts-1)),
		On:          func(err error) bool { return on[kernel.GRPCStatus(kernel.CodeOf(err))] },
		BackoffBase: c.BackoffBase,
		BackoffMax:  c.BackoffMax,
	}
}

// hostOf is target's routes in force, shared by its subscriptions and
// routers.
func (r *Registry) hostOf(target string) *atomic.Pointer[routeState] {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosts[target]
	if h == nil {
		h = &atomic.Pointer[routeState]{}
		r.hosts[target] = h
	}
	return h
}

var (
	_ extension.Registry       = (*Registry)(nil)
	_ extension.RouterProvider = (*Registry)(nil)
)

// Register does nothing: in a mesh the platform lists the providers.
func (r *Registry) Register(context.Context, *kernel.URL) error { return nil }

// Unregister does nothing, as Register.
func (r *Registry) Unregister(context.Context, *kernel.URL) error { return nil }

// Client is the registry's ADS client.
func (r *Registry) Client() *Client { return r.c }

// Subscribe follows the reference's listener, its route configuration,
// the clusters its routes name and their endpoints, and gives listener the
// providers: one URL per healthy endpoint of the best priority of each
// cluster, with the cluster's name (KeyCluster).
func (r *Registry) Subscribe(_ context.Context, consumer *kernel.URL, listener extension.NotifyListener) error {
	target := targetOf(consumer)
	if target == "" {
		return fmt.Errorf("reference %s names nothing in the mesh: set its provided_by (or params %s) to the service's host:port in the mesh, such as echo.default.svc.cluster.local:7070",
			consumer.ServiceKey(), KeyListener)
	}
	s := &subscription{r: r, consumer: consumer, listener: listener, target: target,
		clusters: map[string]*clusterWatch{}, host: r.hostOf(target)}
	r.mu.Lock()
	r.subs[listener] = s
	r.mu.Unlock()
	name := strings.ReplaceAll(r.b.ClientListenerTemplate, "%s", target)
	s.mu.Lock()
	s.cancelLDS = r.c.Watch(ListenerType, name, s.onListener)
	s.mu.Unlock()
	return nil
}

// Unsubscribe ends listener's subscription.
func (r *Registry) Unsubscribe(_ context.Context, _ *kernel.URL, listener extension.NotifyListener) error {
	r.mu.Lock()
	s := r.subs[listener]
	delete(r.subs, listener)
	r.mu.Unlock()
	if s != nil {
		s.close()
	}
	return nil
}

// Close ends every subscription and the stream.
func (r *Registry) Close() error {
	r.mu.Lock()
	subs := r.subs
	r.subs = map[extension.NotifyListener]*subscription{}
	r.mu.Unlock()
	for _, s := range subs {
		s.close()
	}
	return r.c.Close()
}

// subscription is one reference's chain of watches: listener → route
// configuration → clusters → endpoints.
type subscription struct {
	r        *Registry
	consumer *kernel.URL
	listener extension.NotifyListener
	target   string

	mu        sync.Mutex
	closed    bool
	cancelLDS func()
	cancelRDS func()
	rdsName   string
	host      *atomic.Pointer[routeState]
	routes    *RouteConfig  // the last route configuration taken
	vh        *VirtualHost  // its virtual host for the target
	msd       time.Duration // the listener's default route timeout
	filters   []HTTPFilter  // the listener's fault filters
	// inflight counts each cluster's calls in flight (max_requests).
	inflight map[string]*atomic.Int64
	clusters map[string]*clusterWatch
	notified string // the last list given, to skip repeats
}

type clusterWatch struct {
	cancelCDS, cancelEDS func()
	edsName              string
	cluster              *Cluster
	endpoints            *Endpoints
}

func (s *subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, f := range []func(){s.cancelLDS, s.cancelRDS} {
		if f != nil {
			f()
		}
	}
	for _, cw := range s.clusters {
		cw.stop()
	}
	s.clusters = nil
}

func (cw *clusterWatch) stop() {
	if cw.cancelEDS != nil {
		cw.cancelEDS()
	}
	if cw.cancelCDS != nil {
		cw.cancelCDS()
	}
}

func (s *subscription) onListener(v any, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if !exists {
		// The listener is gone (or never came): the last providers stay,
		// as a registry keeps its list through an empty push.
		s.r.log.Warn("weft: xds: listener not found or removed; the reference keeps its last providers", "target", s.target)
		return
	}
	l, ok := v.(*Listener)
	if !ok {
		s.r.log.Warn("weft: xds: the listener is a server's inbound listener, not a client's; the reference keeps its last providers", "target", s.target)
		return
	}
	if l.MaxStreamDuration != s.msd || !sameFilters(l.Filters, s.filters) {
		s.msd, s.filters = l.MaxStreamDuration, l.Filters
		if s.routes != nil && l.Inline == nil {
			s.storeRoutesLocked()
		}
	}
	if l.Inline != nil {
		if s.cancelRDS != nil {
			s.cancelRDS()
			s.cancelRDS, s.rdsName = nil, ""
		}
		s.setRoutesLocked(l.Inline)
		return
	}
	if l.RouteConfigName == s.rdsName {
		return
	}
	if s.cancelRDS != nil {
		s.cancelRDS()
	}
	s.rdsName = l.RouteConfigName
	// The watch may call back at once with a known value: not under s.mu.
	name := l.RouteConfigName
	s.mu.Unlock()
	cancel := s.r.c.Watch(RouteType, name, func(v any, exists bool) { s.onRoutes(name, v, exists) })
	s.mu.Lock()
	s.cancelRDS = cancel
}

func (s *subscription) onRoutes(name string, v any, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || name != s.rdsName || !exists {
		return
	}
	s.setRoutesLocked(v.(*RouteConfig))
}

// setRoutesLocked takes a route configuration: the clusters of the
// virtual host matching the target are watched, the others dropped.
func (s *subscription) setRoutesLocked(rc *RouteConfig) {
	vh := MatchVirtualHost(rc.VirtualHosts, s.target)
	s.routes, s.vh = rc, vh
	s.storeRoutesLocked()
	want := map[string]bool{}
	if vh != nil {
		for _, rt := range vh.Routes {
			for _, c := range rt.Clusters {
				want[c.Name] = true
			}
		}
	} else {
		s.r.log.Warn("weft: xds: could not find VirtualHost for the target", "target", s.target, "route_configuration", rc.Name)
	}
	for name, cw := range s.clusters {
		if !want[name] {
			cw.stop()
			delete(s.clusters, name)
		}
	}
	var added []string
	for name := range want {
		if s.clusters[name] == nil {
			s.clusters[name] = &clusterWatch{}
			added = append(added, name)
		}
	}
	s.notifyLocked()
	for _, name := range added {
		cw := s.clusters[name]
		s.mu.Unlock()
		cancel := s.r.c.Watch(ClusterType, name, func(v any, exists bool) { s.onCluster(name, v, exists) })
		s.mu.Lock()
		if s.clusters[name] == cw {
			cw.cancelCDS = cancel
		} else {
			cancel()
		}
	}
}

// storeRoutesLocked makes the routes in force of the last route
// configuration, listener and clusters.
func (s *subscription) storeRoutesLocked() {
	s.host.Store(newRouteState(s.vh, s.msd, s.clusterPolicyLocked, s.filters, &s.r.faults))
}

// sameFilters reports whether two listeners' filters are the same
// values (a listener sent again unchanged keeps the routes in force).
func sameFilters(a, b []HTTPFilter) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || *a[i].Fault != *b[i].Fault {
			return false
		}
	}
	return true
}

// clusterPolicyLocked is what the cluster name, as last known, adds to
// its calls' policies.
func (s *subscription) clusterPolicyLocked(name string) clusterPolicy {
	cw := s.clusters[name]
	if cw == nil || cw.cluster == nil {
		return clusterPolicy{}
	}
	c := cw.cluster
	n := s.inflight[name]
	if n == nil {
		if s.inflight == nil {
			s.inflight = map[string]*atomic.Int64{}
		}
		n = &atomic.Int64{}
		s.inflight[name] = n
	}
	return clusterPolicy{lb: c.LBPolicy, admit: admission(c.EDSName, c.MaxRequests, n)}
}

func (s *subscription) onCluster(name string, v any, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cw := s.clusters[name]
	if s.closed || cw == nil {
		return
	}
	if !exists {
		cw.cluster = nil
		s.notifyLocked()
		return
	}
	c := v.(*Cluster)
	old := cw.cluster
	cw.cluster = c
	if old == nil || old.LBPolicy != c.LBPolicy || old.MaxRequests != c.MaxRequests || old.EDSName != c.EDSName {
		s.storeRoutesLocked()
	}
	if c.EDSName == cw.edsName {
		s.notifyLocked()
		return
	}
	if cw.cancelEDS != nil {
		cw.cancelEDS()
	}
	cw.edsName, cw.endpoints = c.EDSName, nil
	eds := c.EDSName
	s.mu.Unlock()
	cancel := s.r.c.Watch(EndpointType, eds, func(v any, exists bool) { s.onEndpoints(name, eds, v, exists) })
	s.mu.Lock()
	if s.clusters[name] == cw && cw.edsName == eds {
		cw.cancelEDS = cancel
	} else {
		cancel()
	}
}

func (s *subscription) onEndpoints(cluster, eds string, v any, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cw := s.clusters[cluster]
	if s.closed || cw == nil || cw.edsName != eds {
		return
	}
	if exists {
		cw.endpoints = v.(*Endpoints)
	} else {
		cw.endpoints = nil
	}
	s.notifyLocked()
}

// notifyLocked gives the listener the providers of every cluster known
// now. A cluster not yet known adds none; the list is given only when it
// changed.
func (s *subscription) notifyLocked() {
	var urls []*kernel.URL
	names := make([]string, 0, len(s.clusters))
	for n := range s.clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cw := s.clusters[n]
		if cw.cluster == nil || cw.endpoints == nil {
			continue
		}
		urls = append(urls, s.providers(n, cw)...)
	}
	var key strings.Builder
	for _, u := range urls {
		key.WriteString(u.String())
		key.WriteByte('\n')
	}
	if key.String() == s.notified {
		return
	}
	s.notified = key.String()
	s.listener.Notify(urls)
}

// providers are the URLs of a cluster's endpoints: the healthy ones of
// its best priority that has any (priority failover), each weighted by its
// locality's weight times its own.
func (s *subscription) providers(name string, cw *clusterWatch) []*kernel.URL {
	best := uint32(0)
	found := false
	for _, l := range cw.endpoints.Localities {
		for _, e := range l.Endpoints {
			if e.Healthy && (!found || l.Priority < best) {
				best, found = l.Priority, true
			}
		}
	}
	if !found {
		return nil
	}
	proto := s.consumer.Param(cluster.KeyProtocols)
	if proto == "" {
		proto = "tri" // a mesh speaks gRPC
	}
	var out []*kernel.URL
	for _, l := range cw.endpoints.Localities {
		if l.Priority != best {
			continue
		}
		for _, e := range l.Endpoints {
			if !e.Healthy {
				continue
			}
			w := min(uint64(l.Weight)*uint64(e.Weight), 1<<31-1)
			p := map[string]string{
				kernel.KeyInterface: s.consumer.Interface(),
				kernel.KeySide:      kernel.SideProvider,
				KeyCluster:          name,
				kernel.KeyWeight:    strconv.FormatUint(w, 10),
			}
			if loc := l.Locality; loc != (Locality{}) {
				p[KeyLocality] = loc.Region + "/" + loc.Zone + "/" + loc.SubZone
			}
			for k, v := range cw.cluster.Outlier {
				p[k] = v
			}
			if sec := cw.cluster.Security; sec != nil {
				securityParams(sec, s.r.b.CertificateProviders, p)
			}
			if g := s.consumer.Param(kernel.KeyGroup); g != "" {
				p[kernel.KeyGroup] = g
			}
			if v := s.consumer.Param(kernel.KeyVersion); v != "" {
				p[kernel.KeyVersion] = v
			}
			out = append(out, kernel.NewURL(proto, e.Host, int(e.Port), s.consumer.Interface(), p))
		}
	}
	return out
}

// MatchVirtualHost is gRPC's virtual host choice (A28) for host: an exact
// domain, then the longest suffix (*abc), then the longest prefix (abc*),
// then "*"; nil when none matches.
func MatchVirtualHost(vhs []VirtualHost, host string) *VirtualHost {
	host = strings.ToLower(host)
	var best *VirtualHost
	bestKind, bestLen := 5, -1
	for i := range vhs {
		for _, d := range vhs[i].Domains {
			kind, ok := domainMatch(strings.ToLower(d), host)
			if !ok {
				continue
			}
			if kind < bestKind || kind == bestKind && len(d) > bestLen {
				best, bestKind, bestLen = &vhs[i], kind, len(d)
			}
		}
	}
	return best
}

// domainMatch reports whether pattern matches host and how: 0 exact, 1
// suffix, 2 prefix, 3 universal.
func domainMatch(pattern, host string) (int, bool) {
	switch {
	case pattern == "*":
		return 3, true
	case pattern == "":
		return 0, false
	case strings.HasPrefix(pattern, "*"):
		return 1, !strings.Contains(pattern[1:], "*") && strings.HasSuffix(host, pattern[1:])
	case strings.HasSuffix(pattern, "*"):
		return 2, !strings.Contains(pattern[:len(pattern)-1], "*") && strings.HasPrefix(host, pattern[:len(pattern)-1])
	case strings.Contains(pattern, "*"):
		return 0, false
	}
	return 0, pattern == host
}

// Router routes the calls of consumer by its listener's routes (gRFC
// A28): the first route whose match a call meets (path
// /<interface>/<method>, headers as the call's attachments, runtime
// fraction) picks one of its clusters by weight, and the call goes to that
// cluster's providers. A reference that names nothing in the mesh has no
// router.
func (r *Registry) Router(consumer *kernel.URL) (extension.Router, error) {
	target := targetOf(consumer)
	if target == "" {
		return nil, nil
	}
	return &router{host: r.hostOf(target)}, nil
}

func targetOf(consumer *kernel.URL) string {
	if t := consumer.Param(KeyListener); t != "" {
		return t
	}
	return consumer.Param("provided-by")
}

// RouterPriority is where the mesh's router runs in a reference's chain:
// after the tag and condition rules an operator sets in weft.
const RouterPriority = 1000

// router reads its target's routes in force: the virtual host was chosen
// when they came, so a call only walks its routes.
type router struct{ host *atomic.Pointer[routeState] }

var _ extension.PolicyRouter = (*router)(nil)

// attrPick holds the *WeightedCluster a call's route chose (a pointer into
// the immutable routes: no allocation), so that every try of the call goes
// to the same cluster, as gRPC keeps a call's cluster across retries.
const attrPick = "weft.xds.pick"

func (rt *router) Priority() int { return RouterPriority }

// CallPolicy chooses inv's route and cluster once per call and gives the
// route's timeout and retry policy.
func (rt *router) CallPolicy(url *kernel.URL, inv *kernel.Invocation) *extension.CallPolicy {
	st := rt.host.Load()
	if st == nil || st.vh == nil {
		return nil
	}
	i, k := st.match(url, inv)
	if i < 0 {
		return nil
	}
	inv.SetAttribute(attrPick, &st.vh.Routes[i].Clusters[k])
	return st.policies[i][k]
}

// match is the first route inv meets and the cluster it picks, by index;
// -1: none (gRPC: "no matched route was found").
func (st *routeState) match(url *kernel.URL, inv *kernel.Invocation) (route, cluster int) {
	path := "/" + url.Interface() + "/" + inv.Method
	for i := range st.vh.Routes {
		if r := &st.vh.Routes[i]; r.matches(path, inv) {
			return i, r.pick()
		}
	}
	return -1, -1
}

func (rt *router) Route(invokers []kernel.Invoker, url *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	var wc *WeightedCluster
	if v, ok := inv.Attribute(attrPick); ok {
		wc = v.(*WeightedCluster)
	} else {
		st := rt.host.Load()
		if st == nil {
			return invokers // no routes yet: the providers listed
		}
		if st.vh == nil {
			return nil // gRPC: "could not find VirtualHost"
		}
		i, k := st.match(url, inv)
		if i < 0 {
			return nil
		}
		wc = &st.vh.Routes[i].Clusters[k]
	}
	var out []kernel.Invoker
	for _, iv := range invokers {
		if iv.URL().Param(KeyCluster) == wc.Name {
			out = append(out, iv)
		}
	}
	return out
}

// matches is A28's route match: path (prefix, exact or regex; case as the
// route says), every header matcher, then the runtime fraction.
func (r *Route) matches(path string, inv *kernel.Invocation) bool {
	p := path
	switch {
	case r.Regex != nil:
		if !r.Regex.MatchString(p) {
			return false
		}
	case r.Path != "":
		if r.CaseSensitive && p != r.Path || !r.CaseSensitive && !strings.EqualFold(p, r.Path) {
			return false
		}
	default:
		if r.CaseSensitive && !strings.HasPrefix(p, r.Prefix) ||
			!r.CaseSensitive && !strings.HasPrefix(strings.ToLower(p), strings.ToLower(r.Prefix)) {
			return false
		}
	}
	for i := range r.Headers {
		if !r.Headers[i].matches(inv) {
			return false
		}
	}
	return r.Fraction >= 1_000_000 || rand.Uint32N(1_000_000) < r.Fraction
}

func (h *HeaderMatch) matches(inv *kernel.Invocation) bool {
	raw, present := inv.Attachment(h.Name)
	v := inv.AttachmentString(h.Name)
	if raw == nil {
		present = false
	}
	var ok bool
	switch h.Kind {
	case "present":
		ok = present == *h.Present
	case "exact":
		ok = present && v == h.Exact
	case "prefix":
		ok = present && strings.HasPrefix(v, h.Prefix)
	case "suffix":
		ok = present && strings.HasSuffix(v, h.Suffix)
	case "contains":
		ok = present && strings.Contains(v, h.Contains)
	case "regex":
		ok = present && h.Regex.MatchString(v)
	case "range":
		n, err := strconv.ParseInt(v, 10, 64)
		ok = present && err == nil && n >= h.RangeStart && n < h.RangeEnd
	}
	return ok != h.Invert
}

// pick chooses one of the route's clusters by weight (random weighted, as
// grpc-go's WRR), by index.
func (r *Route) pick() int {
	if len(r.Clusters) == 1 {
		return 0
	}
	var total uint64
	for _, c := range r.Clusters {
		total += uint64(c.Weight)
	}
	n := rand.Uint64N(total)
	for i, c := range r.Clusters {
		if w := uint64(c.Weight); n < w {
			return i
		} else {
			n -= w
		}
	}
	return len(r.Clusters) - 1
}
