package xds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resource "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// controlPlane is go-control-plane's xDS server with a snapshot cache, on
// 127.0.0.1, as a test's management server. It records the NACKs it gets.
type controlPlane struct {
	addr  string
	cache cache.SnapshotCache
	gs    *grpc.Server
	lis   net.Listener
	mu    sync.Mutex
	nacks []string
	reqs  atomic.Int64
	delta atomic.Int64 // delta requests
}

const testNode = "weft-test"

func startControlPlane(t *testing.T, addr string) *controlPlane {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{addr: lis.Addr().String(), lis: lis}
	// ads false: the cache answers a request for some of a type's
	// resources (go-control-plane's ADS mode waits for all of them).
	cp.cache = cache.NewSnapshotCache(false, cache.IDHash{}, nil)
	nacked := func(d interface{ GetMessage() string }) {
		cp.mu.Lock()
		cp.nacks = append(cp.nacks, d.GetMessage())
		cp.mu.Unlock()
	}
	cb := server.CallbackFuncs{StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
		cp.reqs.Add(1)
		if d := req.GetErrorDetail(); d != nil {
			nacked(d)
		}
		return nil
	}, StreamDeltaRequestFunc: func(_ int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
		cp.reqs.Add(1)
		cp.delta.Add(1)
		if d := req.GetErrorDetail(); d != nil {
			nacked(d)
		}
		return nil
	}}
	srv := server.NewServer(context.Background(), cp.cache, cb)
	cp.gs = grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(cp.gs, srv)
	go cp.gs.Serve(lis)
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlane) stop() { cp.gs.Stop() }

func (cp *controlPlane) nacked() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.nacks...)
}

func (cp *controlPlane) set(t *testing.T, version string, res map[resource.Type][]types.Resource) {
	t.Helper()
	snap, err := cache.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), testNode, snap); err != nil {
		t.Fatal(err)
	}
}

// The mesh's resources for one service, as istiod's grpc generator names
// them: listener host:port, route outbound|port||host, EDS clusters.
const (
	target = "echo.default.svc.cluster.local:7070"
	route  = "outbound|7070||echo.default.svc.cluster.local"
)

func listener() *listenerv3.Listener {
	router, _ := anypb.New(&routerv3.Router{})
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			RouteConfigName: route,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	return &listenerv3.Listener{Name: target, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}
}

func routes(clusters map[string]uint32) *routev3.RouteConfiguration {
	var action *routev3.RouteAction
	if len(clusters) == 1 {
		for c := range clusters {
			action = &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c}}
		}
	} else {
		var wc []*routev3.WeightedCluster_ClusterWeight
		for c, w := range clusters {
			wc = append(wc, &routev3.WeightedCluster_ClusterWeight{Name: c, Weight: wrapperspb.UInt32(w)})
		}
		action = &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: wc}}}
	}
	return &routev3.RouteConfiguration{Name: route, VirtualHosts: []*routev3.VirtualHost{{
		Name: "echo", Domains: []string{"echo.default.svc.cluster.local", target},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: action}}},
	}}}
}

func edsCluster(name string, lb clusterv3.Cluster_LbPolicy) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
		LbPolicy: lb}
}

// endpoints of cluster at addrs (host:port), by priority: addrs[i] is in
// priority i's locality.
func endpoints(cluster string, byPriority ...[]string) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	for p, addrs := range byPriority {
		le := &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Region: "r", Zone: fmt.Sprintf("z%d", p)},
			LoadBalancingWeight: wrapperspb.UInt32(1), Priority: uint32(p)}
		for _, a := range addrs {
			host, port, _ := net.SplitHostPort(a)
			pn, _ := strconv.Atoi(port)
			le.LbEndpoints = append(le.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(pn)}}}}}},
				HealthStatus: corev3.HealthStatus_HEALTHY})
		}
		cla.Endpoints = append(cla.Endpoints, le)
	}
	return cla
}

func snapshot(clusters map[string]uint32, lb clusterv3.Cluster_LbPolicy, eps ...*endpointv3.ClusterLoadAssignment) map[resource.Type][]types.Resource {
	res := map[resource.Type][]types.Resource{
		resource.ListenerType: {listener()},
		resource.RouteType:    {routes(clusters)},
	}
	for c := range clusters {
		res[resource.ClusterType] = append(res[resource.ClusterType], edsCluster(c, lb))
	}
	for _, e := range eps {
		res[resource.EndpointType] = append(res[resource.EndpointType], e)
	}
	return res
}

// TestClientFollowsTheChainAndNACKsABadCluster: the ADS client against
// go-control-plane's server: the listener, route, cluster and endpoints
// come; a snapshot whose cluster weft cannot use (MAGLEV) is NACKed with
// the reason, and the last good cluster stays; a good one after is ACKed.
func TestClientFollowsTheChainAndNACKsABadCluster(t *testing.T) {
	cp := startControlPlane(t, "")
	cp.set(t, "1", snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{"10.0.0.1:7070"})))
	c, err := NewClient(Server{URI: cp.addr, Creds: "insecure"}, Node{ID: testNode}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan any, 16)
	c.Watch(ListenerType, target, func(v any, ok bool) { got <- v })
	c.Watch(RouteType, route, func(v any, ok bool) { got <- v })
	var lb atomic.Value
	c.Watch(ClusterType, "echo", func(v any, ok bool) {
		if ok {
			lb.Store(v.(*Cluster).LBPolicy)
		}
		got <- v
	})
	c.Watch(EndpointType, "echo", func(v any, ok bool) { got <- v })
	for range 4 {
		select {
		case v := <-got:
			if v == nil {
				t.Fatal("a resource was not found")
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("resources did not all come: %+v", c.Stats())
		}
	}
	if l, ok := lb.Load().(string); !ok || l != "roundrobin" {
		t.Fatalf("cluster lb %v", lb.Load())
	}
	cp.set(t, "2", snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_MAGLEV, endpoints("echo", []string{"10.0.0.1:7070"})))
	deadline := time.Now().Add(5 * time.Second)
	for len(cp.nacked()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no NACK reached the server: %+v", c.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	nack := cp.nacked()[0]
	t.Logf("NACK: %s", nack)
	if !strings.Contains(nack, `resource "echo"`) || !strings.Contains(nack, "unexpected lbPolicy MAGLEV") {
		t.Fatalf("NACK %q does not say which cluster and why", nack)
	}
	if l := lb.Load().(string); l != "roundrobin" {
		t.Fatalf("after the NACK the cluster's lb is %q: the last good one was not kept", l)
	}
	cp.set(t, "3", snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_LEAST_REQUEST, endpoints("echo", []string{"10.0.0.1:7070"})))
	for deadline := time.Now().Add(5 * time.Second); lb.Load().(string) != "leastactive"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the good snapshot after the NACK was not taken: %+v", c.Stats())
		}
	}
}

// node is a provider of org.weft.Node that says which it is.
type node struct {
	name  string
	calls atomic.Int64
	// running and most: calls in the service now, and the most at once.
	running, most atomic.Int64
}

func (n *node) Who(ctx context.Context, s string) (string, error) {
	n.calls.Add(1)
	now := n.running.Add(1)
	defer n.running.Add(-1)
	for m := n.most.Load(); now > m && !n.most.CompareAndSwap(m, now); m = n.most.Load() {
	}
	if s == "slow" {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
	if n.name == "busy" {
		time.Sleep(20 * time.Millisecond) // holds its one slot (executes: 1)
	}
	return n.name, nil
}

func startProvider(t *testing.T, name string, serviceKeys ...string) (*node, string, *weft.App) {
	t.Helper()
	return startProviderWith(t, name, "", strings.Join(serviceKeys, ""))
}

// startProviderWith starts a provider with extraYAML at the config's root
// (a tls block) and serviceKeys in its service's settings.
func startProviderWith(t *testing.T, name, extraYAML, serviceKeys string) (*node, string, *weft.App) {
	t.Helper()
	n := &node{name: name}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("node", n),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("protocols: {tri: {port: %d}}\nprovider: {services: {node: {interface: org.weft.Node, protocol: tri%s}}}\n%s", port, serviceKeys, extraYAML))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return n, fmt.Sprintf("127.0.0.1:%d", port), app
}

type nodeClient struct {
	Who func(ctx context.Context, s string) (string, error)
}

// startConsumer starts a consumer of org.weft.Node through the control
// plane at cpAddr; query is added to the registry address (&delta=true).
func startConsumer(t *testing.T, cpAddr string, query ...string) *nodeClient {
	t.Helper()
	return startConsumerAt(t, fmt.Sprintf("xds://%s?node=%s%s", cpAddr, testNode, strings.Join(query, "")))
}

// startConsumerAt starts a consumer of org.weft.Node through the xds
// registry at address (xds://?bootstrap=... for a bootstrap file).
func startConsumerAt(t *testing.T, address string) *nodeClient {
	t.Helper()
	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(Plugin()), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {mesh: {address: %q}}
consumer:
  references:
    node: {interface: org.weft.Node, protocol: tri, provided_by: %q, timeout: 2000}
`, address, target))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return &c
}

// load calls who from callers goroutines until stopped, counting calls,
// failures and answers by provider.
type load struct {
	calls, failed atomic.Int64
	last          atomic.Value
	mu            sync.Mutex
	by            map[string]int
	stopCh        chan struct{}
	wg            sync.WaitGroup
}

func startLoad(callers int, c *nodeClient) *load {
	l := &load{by: map[string]int{}, stopCh: make(chan struct{})}
	for range callers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopCh:
					return
				default:
				}
				l.calls.Add(1)
				who, err := c.Who(context.Background(), "x")
				if err != nil {
					l.failed.Add(1)
					l.last.Store(err.Error())
					time.Sleep(10 * time.Millisecond)
					continue
				}
				l.mu.Lock()
				l.by[who]++
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *load) reset() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	by := l.by
	l.by = map[string]int{}
	return by
}

func (l *load) stop(t *testing.T) {
	t.Helper()
	close(l.stopCh)
	l.wg.Wait()
	if f := l.failed.Load(); f > 0 {
		t.Errorf("%d of %d calls failed; the last: %v", f, l.calls.Load(), l.last.Load())
	}
}

// TestMeshDiscoveryUnderLoad: a weft consumer finds weft Triple providers
// through go-control-plane's server (listener → route → cluster →
// endpoints) and, under 8 callers with 0 failed calls: follows an endpoint
// removed and added; fails over to the next priority's locality when the
// first has none; keeps its last configuration while the control plane is
// down and after it restarts; and keeps it when a bad snapshot is NACKed.
// Over the state-of-the-world protocol and over delta xDS.
func TestMeshDiscoveryUnderLoad(t *testing.T) {
	t.Run("sotw", func(t *testing.T) { testMeshDiscovery(t, "") })
	t.Run("delta", func(t *testing.T) { testMeshDiscovery(t, "&delta=true") })
}

func testMeshDiscovery(t *testing.T, query string) {
	cp := startControlPlane(t, "")
	a, aAddr, _ := startProvider(t, "a")
	b, bAddr, _ := startProvider(t, "b")
	_, cAddr, _ := startProvider(t, "c")
	v := 0
	set := func(eps *endpointv3.ClusterLoadAssignment, lb clusterv3.Cluster_LbPolicy) {
		v++
		cp.set(t, strconv.Itoa(v), snapshot(map[string]uint32{"echo": 1}, lb, eps))
	}
	set(endpoints("echo", []string{aAddr, bAddr}), clusterv3.Cluster_ROUND_ROBIN)
	c := startConsumer(t, cp.addr, query)
	l := startLoad(8, c)
	defer l.stop(t)
	waitFor := func(what string, ok func(by map[string]int) bool) map[string]int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l.reset()
			time.Sleep(300 * time.Millisecond)
			by := l.reset()
			if ok(by) {
				return by
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: calls by provider %v", what, by)
			}
		}
	}
	by := waitFor("both endpoints serve", func(by map[string]int) bool { return by["a"] > 0 && by["b"] > 0 && by["c"] == 0 })
	t.Logf("a and b listed: %v", by)

	set(endpoints("echo", []string{bAddr}), clusterv3.Cluster_ROUND_ROBIN)
	by = waitFor("a removed", func(by map[string]int) bool { return by["a"] == 0 && by["b"] > 0 })
	t.Logf("a removed: %v", by)
	set(endpoints("echo", []string{aAddr, bAddr}), clusterv3.Cluster_ROUND_ROBIN)
	by = waitFor("a added back", func(by map[string]int) bool { return by["a"] > 0 && by["b"] > 0 })
	t.Logf("a added back: %v", by)

	// Priority 0 has only unhealthy endpoints: priority 1's locality
	// takes the calls.
	eps := endpoints("echo", []string{aAddr, bAddr}, []string{cAddr})
	for _, e := range eps.Endpoints[0].LbEndpoints {
		e.HealthStatus = corev3.HealthStatus_UNHEALTHY
	}
	set(eps, clusterv3.Cluster_ROUND_ROBIN)
	by = waitFor("failover to priority 1", func(by map[string]int) bool { return by["c"] > 0 && by["a"]+by["b"] == 0 })
	t.Logf("priority 0 unhealthy, priority 1 serves: %v", by)
	set(endpoints("echo", []string{aAddr, bAddr}, []string{cAddr}), clusterv3.Cluster_ROUND_ROBIN)
	by = waitFor("back to priority 0", func(by map[string]int) bool { return by["c"] == 0 && by["a"] > 0 })
	t.Logf("priority 0 healthy again: %v", by)

	// The control plane goes away: the calls go on with the last
	// configuration; it comes back on the same address with a new
	// snapshot, which is taken.
	cp.stop()
	time.Sleep(500 * time.Millisecond)
	by = waitFor("calls while the control plane is down", func(by map[string]int) bool { return by["a"] > 0 && by["b"] > 0 })
	t.Logf("control plane down: %v", by)
	cp2 := startControlPlane(t, cp.addr)
	cp2.set(t, "100", snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{bAddr})))
	by = waitFor("the restarted control plane's snapshot", func(by map[string]int) bool { return by["a"] == 0 && by["b"] > 0 })
	t.Logf("control plane back, a gone: %v", by)

	// A bad snapshot (endpoints with a zero weight) is NACKed; b keeps
	// serving.
	bad := endpoints("echo", []string{aAddr, bAddr})
	bad.Endpoints[0].LbEndpoints[0].LoadBalancingWeight = wrapperspb.UInt32(0)
	cp2.set(t, "101", snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, bad))
	deadline := time.Now().Add(5 * time.Second)
	for len(cp2.nacked()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the bad snapshot was not NACKed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("NACK: %s", cp2.nacked()[0])
	if !strings.Contains(cp2.nacked()[0], "zero weight") {
		t.Errorf("NACK %q does not say why", cp2.nacked()[0])
	}
	by = waitFor("the old config in force after the NACK", func(by map[string]int) bool { return by["a"] == 0 && by["b"] > 0 })
	t.Logf("after the NACK: %v; calls a=%d b=%d", by, a.calls.Load(), b.calls.Load())
	if delta := cp.delta.Load() + cp2.delta.Load(); (query != "") != (delta > 0) {
		t.Errorf("%d delta requests reached the control planes (query %q)", delta, query)
	}
}

func TestParseBootstrap(t *testing.T) {
	b, err := ParseBootstrap([]byte(`{
  "xds_servers": [{"server_uri": "unix:///etc/istio/proxy/XDS", "channel_creds": [{"type": "google_default"}, {"type": "insecure"}], "server_features": ["xds_v3", "ignore_resource_deletion"]}],
  "node": {"id": "sidecar~10.1.2.3~demo.default~default.svc.cluster.local", "locality": {"zone": "z1"}, "metadata": {"GENERATOR": "grpc"}},
  "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {"certificate_file": "/d/cert-chain.pem", "private_key_file": "/d/key.pem", "ca_certificate_file": "/d/root-cert.pem", "refresh_interval": "900s"}},
    "other": {"plugin_name": "unknown", "config": {}}},
  "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
  "unknown_field": 1
}`))
	if err != nil {
		t.Fatal(err)
	}
	s := b.Servers[0]
	if s.URI != "unix:///etc/istio/proxy/XDS" || s.Creds != "insecure" || !s.IgnoreResourceDeletion {
		t.Fatalf("server %+v", s)
	}
	if b.Node.ID != "sidecar~10.1.2.3~demo.default~default.svc.cluster.local" || b.Node.Locality.Zone != "z1" || b.Node.Metadata["GENERATOR"] != "grpc" {
		t.Fatalf("node %+v", b.Node)
	}
	cp, ok := b.CertificateProviders["default"]
	if !ok || cp.Refresh != 900*time.Second || cp.CACertificateFile != "/d/root-cert.pem" || len(b.CertificateProviders) != 1 {
		t.Fatalf("certificate providers %+v", b.CertificateProviders)
	}
	if b.ClientListenerTemplate != "%s" || b.ServerListenerTemplate != "xds.istio.io/grpc/lds/inbound/%s" {
		t.Fatalf("templates %q %q", b.ClientListenerTemplate, b.ServerListenerTemplate)
	}
	for _, c := range []struct{ doc, want string }{
		{`{}`, "required field `xds_servers` not found"},
		{`{"xds_servers": [{"channel_creds": [{"type": "insecure"}]}]}`, "`server_uri` field in server config cannot be empty"},
		{`{"xds_servers": [{"server_uri": "x:1"}]}`, "`channel_creds` field in server config cannot be empty"},
		{`{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "google_default"}]}]}`, "none of its channel_creds (google_default)"},
		{`{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}]}], "certificate_providers": {"d": {"plugin_name": "file_watcher", "config": {"certificate_file": "c"}}}}`, "private key file and identity cert file should be both specified"},
		{`{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}]}], "certificate_providers": {"d": {"plugin_name": "file_watcher", "config": {}}}}`, "at least one credential file"},
		{`{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}]}], "certificate_providers": {"d": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "c", "refresh_interval": "10m"}}}}`, "refresh_interval"},
		{`not json`, "failed to parse bootstrap config"},
	} {
		if _, err := ParseBootstrap([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}

func TestMatchVirtualHost(t *testing.T) {
	vhs := []VirtualHost{
		{Name: "any", Domains: []string{"*"}},
		{Name: "prefix", Domains: []string{"echo.*"}},
		{Name: "suffix", Domains: []string{"*.svc.cluster.local"}},
		{Name: "longsuffix", Domains: []string{"*.default.svc.cluster.local"}},
		{Name: "exact", Domains: []string{"echo.default.svc.cluster.local:7070"}},
	}
	for _, c := range []struct{ host, want string }{
		{"echo.default.svc.cluster.local:7070", "exact"},
		{"other.default.svc.cluster.local", "longsuffix"},
		{"other.prod.svc.cluster.local", "suffix"},
		{"echo.elsewhere", "prefix"},
		{"nothing", "any"},
	} {
		if vh := MatchVirtualHost(vhs, c.host); vh == nil || vh.Name != c.want {
			t.Errorf("%s: %v, want %s", c.host, vh, c.want)
		}
	}
	if vh := MatchVirtualHost([]VirtualHost{{Domains: []string{"a*b"}}}, "ab"); vh != nil {
		t.Errorf("a domain with * inside matched")
	}
}

// TestMeshRoutesSplitTrafficAndMatchHeaders: the route's weighted
// clusters split 2,000 calls 90/10 (within ±5 points), and a header route
// sends the calls carrying x-canary: yes to the canary cluster, the others
// to the stable one; 8 callers, 0 failed calls.
func TestMeshRoutesSplitTrafficAndMatchHeaders(t *testing.T) {
	cp := startControlPlane(t, "")
	_, aAddr, _ := startProvider(t, "stable")
	_, bAddr, _ := startProvider(t, "canary")
	res := snapshot(map[string]uint32{"v1": 90, "v2": 10}, clusterv3.Cluster_ROUND_ROBIN,
		endpoints("v1", []string{aAddr}), endpoints("v2", []string{bAddr}))
	cp.set(t, "1", res)
	c := startConsumer(t, cp.addr)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for seen := map[string]bool{}; !seen["stable"] || !seen["canary"]; {
		if time.Now().After(deadline) {
			t.Fatalf("both clusters never answered: %v", seen)
		}
		who, err := c.Who(ctx, "x")
		if err == nil {
			seen[who] = true
		}
	}
	var mu sync.Mutex
	by := map[string]int{}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 250 {
				who, err := c.Who(ctx, "x")
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				by[who]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	share := float64(by["canary"]) / float64(by["canary"]+by["stable"])
	t.Logf("90/10 split over 2,000 calls: %v (canary %.1f%%)", by, 100*share)
	if failed.Load() > 0 || share < 0.05 || share > 0.15 {
		t.Fatalf("split %v (canary %.1f%%), %d failed: want 10%% ± 5", by, 100*share, failed.Load())
	}

	// Header routing: x-canary: yes → v2, everything else → v1.
	rc := routes(map[string]uint32{"v1": 1})
	header := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/org.weft.Node/"},
		Headers: []*routev3.HeaderMatcher{{Name: "x-canary", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "yes"}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "v2"}}}}
	rc.VirtualHosts[0].Routes = append([]*routev3.Route{header}, rc.VirtualHosts[0].Routes...)
	res[resource.RouteType] = []types.Resource{rc}
	cp.set(t, "2", res)
	canaryCtx := kernel.WithAttachments(ctx, map[string]any{"x-canary": "yes"})
	deadline = time.Now().Add(10 * time.Second)
	for {
		plain, err1 := c.Who(ctx, "x")
		canary, err2 := c.Who(canaryCtx, "x")
		if err1 == nil && err2 == nil && plain == "stable" && canary == "canary" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("header route not applied: plain %q (%v), x-canary %q (%v)", plain, err1, canary, err2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 200 {
		plain, err1 := c.Who(ctx, "x")
		canary, err2 := c.Who(canaryCtx, "x")
		if err1 != nil || err2 != nil || plain != "stable" || canary != "canary" {
			t.Fatalf("header routing: plain %q (%v), x-canary %q (%v)", plain, err1, canary, err2)
		}
	}
}

// TestMeshRouteTimeoutAndRetry: a route's retry_policy replaces the
// reference's retries, retrying what it names and no more (A44), and its
// max_stream_duration bounds the whole call below the reference's own
// timeout (A31), applied by the cluster under 8 callers.
func TestMeshRouteTimeoutAndRetry(t *testing.T) {
	cp := startControlPlane(t, "")
	// busy takes one call at a time (20 ms each) and refuses the others
	// with RESOURCE_EXHAUSTED (weft's limit exceeded, which weft's own
	// failover retries); idle takes any.
	busy, busyAddr, _ := startProvider(t, "busy", ", executes: 1")
	idle, idleAddr, _ := startProvider(t, "idle")
	res := snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{busyAddr, idleAddr}))
	cp.set(t, "1", res)
	c := startConsumer(t, cp.addr) // timeout: 2000, retries: 2 (the default)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for idle.calls.Load() == 0 || busy.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("both providers never called: busy %d idle %d", busy.calls.Load(), idle.calls.Load())
		}
		c.Who(ctx, "x")
	}
	burst := func() (failed int64, last error) {
		var f atomic.Int64
		var lastErr atomic.Value
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					if _, err := c.Who(ctx, "x"); err != nil {
						f.Add(1)
						lastErr.Store(err)
					}
				}
			})
		}
		wg.Wait()
		last, _ = lastErr.Load().(error)
		return f.Load(), last
	}
	setRoute := func(version string, rp *routev3.RetryPolicy, msd time.Duration) {
		rc := routes(map[string]uint32{"echo": 1})
		a := rc.VirtualHosts[0].Routes[0].GetRoute()
		a.RetryPolicy = rp
		if msd > 0 {
			a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(msd)}
		}
		res[resource.RouteType] = []types.Resource{rc}
		cp.set(t, version, res)
	}
	until := func(what string, ok func(failed int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			failed, last := burst()
			if ok(failed) {
				t.Logf("%s: %d of 400 calls failed (last: %v)", what, failed, last)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of 400 calls failed (last: %v)", what, failed, last)
			}
		}
	}
	until("no retry policy: weft's failover retries a refused call", func(f int64) bool { return f == 0 })
	setRoute("2", &routev3.RetryPolicy{RetryOn: "cancelled,unavailable"}, 0)
	until("retry_on cancelled,unavailable: a refused call is not retried", func(f int64) bool { return f > 0 })
	setRoute("3", &routev3.RetryPolicy{RetryOn: "resource-exhausted", NumRetries: wrapperspb.UInt32(1)}, 0)
	until("retry_on resource-exhausted, one retry", func(f int64) bool { return f == 0 })
	// Under the policy, a burst still has no failed call.
	for range 3 {
		if f, last := burst(); f > 0 {
			t.Fatalf("retry_on resource-exhausted: %d of 400 calls failed: %v", f, last)
		}
	}

	// The route's timeout: a call that takes 1 s ends at the route's
	// 200 ms, not at the reference's 2 s.
	setRoute("4", nil, 200*time.Millisecond)
	deadline = time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		_, err := c.Who(ctx, "slow")
		took := time.Since(start)
		if kernel.CodeOf(err) == kernel.CodeTimeout && took < 900*time.Millisecond {
			t.Logf("route timeout 200ms: the slow call ended in %v: %v", took.Round(time.Millisecond), err)
			if took < 200*time.Millisecond {
				t.Fatalf("the call ended in %v, before the route's timeout", took)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("route timeout not applied: the slow call took %v: %v", took, err)
		}
	}
	if _, err := c.Who(ctx, "x"); err != nil {
		t.Fatalf("a quick call under the route's timeout failed: %v", err)
	}
}

// TestMeshClusterBalancerAndMaxRequests: a cluster's lb_policy picks its
// providers (ROUND_ROBIN alternates where the reference's default, random,
// repeats), and its circuit_breakers max_requests bounds its calls in
// flight, refusing the rest with gRPC's text (A32).
func TestMeshClusterBalancerAndMaxRequests(t *testing.T) {
	cp := startControlPlane(t, "")
	a, aAddr, _ := startProvider(t, "busy")
	b, bAddr, _ := startProvider(t, "busy")
	res := snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{aAddr, bAddr}))
	cp.set(t, "1", res)
	c := startConsumer(t, cp.addr)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for a.calls.Load() == 0 || b.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("both providers never called")
		}
		c.Who(ctx, "x")
	}
	// Serial calls under round robin go a, b, a, b: each call's provider
	// is the other one.
	prevA, repeats := a.calls.Load(), 0
	lastWasA := false
	for i := range 40 {
		if _, err := c.Who(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		isA := a.calls.Load() > prevA
		prevA = a.calls.Load()
		if i > 0 && isA == lastWasA {
			repeats++
		}
		lastWasA = isA
	}
	t.Logf("ROUND_ROBIN: %d repeats in 40 serial calls", repeats)
	if repeats > 0 {
		t.Fatalf("ROUND_ROBIN: %d of 39 serial calls went to the provider of the call before", repeats)
	}

	// max_requests 2: at most 2 calls in flight over both providers.
	cl := edsCluster("echo", clusterv3.Cluster_ROUND_ROBIN)
	cl.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(2)}}}
	res[resource.ClusterType] = []types.Resource{cl}
	cp.set(t, "2", res)
	var refused atomic.Int64
	var other atomic.Value
	burst := func() {
		a.most.Store(0)
		b.most.Store(0)
		refused.Store(0)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 10 {
					_, err := c.Who(ctx, "x")
					switch {
					case err == nil:
					case strings.Contains(err.Error(), "max requests 2 exceeded on service echo"):
						refused.Add(1)
					default:
						other.Store(err)
					}
				}
			})
		}
		wg.Wait()
	}
	deadline = time.Now().Add(10 * time.Second)
	for refused.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("max_requests 2 refused no call of 8 callers")
		}
		burst()
	}
	burst() // all of it under the limit
	if err := other.Load(); err != nil {
		t.Fatalf("a call failed otherwise: %v", err)
	}
	t.Logf("max_requests 2: %d of 80 calls refused; most in flight at once: a %d, b %d", refused.Load(), a.most.Load(), b.most.Load())
	if a.most.Load()+b.most.Load() > 2+1 {
		// +1: a provider's count ends after its answer is on the way,
		// when the consumer may have sent the next call.
		t.Errorf("the providers ran %d and %d calls at once under max_requests 2", a.most.Load(), b.most.Load())
	}
}

// TestMeshOutlierDetectionEjects: a cluster's outlier_detection (A50,
// with Envoy's consecutive_5xx) ejects the provider whose calls keep
// failing from that cluster's calls, under 8 callers with 0 failed calls
// (failover retries the refused ones).
func TestMeshOutlierDetectionEjects(t *testing.T) {
	cp := startControlPlane(t, "")
	busy, busyAddr, _ := startProvider(t, "busy", ", executes: 1")
	_, idleAddr, _ := startProvider(t, "idle")
	res := snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{busyAddr, idleAddr}))
	cp.set(t, "1", res)
	c := startConsumer(t, cp.addr)
	l := startLoad(8, c)
	defer l.stop(t)
	window := func() map[string]int {
		l.reset()
		time.Sleep(300 * time.Millisecond)
		return l.reset()
	}
	deadline := time.Now().Add(10 * time.Second)
	for by := window(); by["busy"] == 0 || by["idle"] == 0; by = window() {
		if time.Now().After(deadline) {
			t.Fatalf("both providers never answered: %v", by)
		}
	}
	cl := edsCluster("echo", clusterv3.Cluster_ROUND_ROBIN)
	cl.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(3), Interval: durationpb.New(time.Second),
		BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(50)}
	res[resource.ClusterType] = []types.Resource{cl}
	cp.set(t, "2", res)
	deadline = time.Now().Add(10 * time.Second)
	for {
		b0 := busy.calls.Load()
		by := window()
		if by["busy"] == 0 && busy.calls.Load() == b0 && by["idle"] > 0 {
			t.Logf("outlier_detection consecutive_5xx 3: busy ejected; a window's calls %v", by)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("busy was not ejected: a window's calls %v", by)
		}
	}
}
