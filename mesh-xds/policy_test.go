package xds

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
)

// TestRetryConfigAsGRPCGo: grpc-go's defaults and error texts (A44).
func TestRetryConfigAsGRPCGo(t *testing.T) {
	rc, err := retryConfig(&routev3.RetryPolicy{RetryOn: "Unavailable, internal,5xx"})
	if err != nil || !rc.On[kernel.GRPCUnavailable] || !rc.On[kernel.GRPCInternal] || len(rc.On) != 2 ||
		rc.NumRetries != 1 || rc.BackoffBase != 25*time.Millisecond || rc.BackoffMax != 250*time.Millisecond {
		t.Fatalf("defaults: %+v, %v", rc, err)
	}
	if rc, err := retryConfig(&routev3.RetryPolicy{RetryOn: "5xx,reset"}); err != nil || rc.On != nil || rc.NumRetries != 0 {
		t.Fatalf("no supported code: %+v, %v; want an empty policy (no retries)", rc, err)
	}
	for _, tc := range []struct {
		rp   *routev3.RetryPolicy
		want string
	}{
		{&routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(0)}, "retry_policy.num_retries = 0; must be >= 1"},
		{&routev3.RetryPolicy{RetryOn: "unavailable", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{}}, "retry_policy.base_interval = 0s; must be > 0"},
		{&routev3.RetryPolicy{RetryOn: "unavailable", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond), MaxInterval: durationpb.New(0)}}, "retry_policy.max_interval = 0s; must be > 0"},
	} {
		if _, err := retryConfig(tc.rp); err == nil || err.Error() != tc.want {
			t.Errorf("%v: err %v, want %q", tc.rp, err, tc.want)
		}
	}
}

// TestRoutePolicies: a route's timeout, else the listener's (A31); a
// route's retry policy, else the virtual host's (A44), at most 5
// attempts; each cluster's load balancer and max_requests (A32).
func TestRoutePolicies(t *testing.T) {
	vhRetry := &RetryConfig{On: map[int]bool{kernel.GRPCUnavailable: true}, NumRetries: 9, BackoffBase: time.Millisecond, BackoffMax: time.Second}
	routeRetry := &RetryConfig{}
	one := []WeightedCluster{{Name: "a", Weight: 1}}
	vh := &VirtualHost{Retry: vhRetry, Routes: []Route{
		{Timeout: 0, HasTimeout: true, Retry: routeRetry, Clusters: one}, // explicit 0: no timeout; its own (empty) policy
		{Timeout: 3 * time.Second, HasTimeout: true, Clusters: one},
		{Clusters: []WeightedCluster{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}},
	}}
	var inflight atomic.Int64
	clusters := func(name string) clusterPolicy {
		if name == "b" {
			return clusterPolicy{lb: "leastactive", admit: admission("b-eds", 2, &inflight)}
		}
		return clusterPolicy{}
	}
	st := newRouteState(vh, time.Second, clusters, nil, nil)
	p0, p1, p2a, p2b := st.policies[0][0], st.policies[1][0], st.policies[2][0], st.policies[2][1]
	if p0.Timeout != 0 || p0.Retry.Retries != 0 {
		t.Errorf("route 0: %+v %+v", p0, p0.Retry)
	}
	if p1.Timeout != 3*time.Second || p1.Retry.Retries != 4 {
		t.Errorf("route 1: timeout %v, retries %d; want 3s and the vhost's 9 capped at 4", p1.Timeout, p1.Retry.Retries)
	}
	if p2a.Timeout != time.Second || p2a.LoadBalance != "" || p2a.Admit != nil {
		t.Errorf("route 2, cluster a: %+v; want the listener's 1s and no cluster policy", p2a)
	}
	if p2b.LoadBalance != "leastactive" || p2b.Admit == nil {
		t.Errorf("route 2, cluster b: %+v; want its lb and admission", p2b)
	}
	unavailable := kernel.Errorf(kernel.CodeNetwork, "down")
	if !p1.Retry.On(unavailable) || p1.Retry.On(kernel.Errorf(kernel.CodeTimeout, "slow")) {
		t.Error("the vhost's policy retries other codes than UNAVAILABLE")
	}
	r1, err1 := p2b.Admit()
	r2, err2 := p2b.Admit()
	_, err3 := p2b.Admit()
	if err1 != nil || err2 != nil || err3 == nil || err3.Error() != "weft: limit exceeded: max requests 2 exceeded on service b-eds" {
		t.Fatalf("max_requests 2: %v, %v, %v", err1, err2, err3)
	}
	r1()
	r2()
	if _, err := p2b.Admit(); err != nil || inflight.Load() != 1 {
		t.Errorf("after two releases: %v, %d in flight", err, inflight.Load())
	}
	if st := newRouteState(&VirtualHost{Routes: []Route{{Clusters: one}}}, 0, nil, nil, nil); st.policies[0][0] != nil {
		t.Errorf("no timeout, retry nor cluster policy: policy %+v, want none", st.policies[0][0])
	}
}

// TestClusterSecurityAsGRPCGo: an UpstreamTlsContext is read as grpc-go
// reads it, and refused with its texts.
func TestClusterSecurityAsGRPCGo(t *testing.T) {
	known := map[string]CertificateProvider{"default": {CertificateFile: "c", PrivateKeyFile: "k", CACertificateFile: "r"}}
	c := securedCluster(t, "echo", "spiffe://cluster.local/ns/default/sa/echo")
	sc, err := clusterSecurity(c, known)
	if err != nil || sc.IdentityInstance != "default" || sc.RootInstance != "default" || len(sc.SANs) != 1 || sc.SANs[0].Kind != "exact" {
		t.Fatalf("security %+v, %v", sc, err)
	}
	if _, err := clusterSecurity(c, nil); err == nil || err.Error() != `identity certificate provider instance name "default" missing in bootstrap configuration` {
		t.Errorf("an instance the bootstrap lacks: %v", err)
	}
	noRoots := securedCluster(t, "echo", "x")
	var up tlsv3.UpstreamTlsContext
	noRoots.GetTransportSocket().GetTypedConfig().UnmarshalTo(&up)
	up.CommonTlsContext.ValidationContextType = nil
	a, _ := anypb.New(&up)
	noRoots.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	if _, err := clusterSecurity(noRoots, known); err == nil || err.Error() != "security configuration on the client-side does not contain root certificate provider instance name" {
		t.Errorf("no roots: %v", err)
	}
	p := map[string]string{}
	securityParams(sc, known, p)
	sans, err := parseSANs(p[paramSAN])
	if err != nil || len(sans) != 1 || !sans[0].match("spiffe://cluster.local/ns/default/sa/echo") || sans[0].match("spiffe://cluster.local/ns/default/sa/echo2") {
		t.Errorf("SAN params %q → %+v, %v", p[paramSAN], sans, err)
	}
}

// TestInboundChainChoice: A36's order — destination port, longest
// destination prefix, source type, longest source prefix, source port —
// then the default chain.
func TestInboundChainChoice(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	l := &ServerListener{Chains: []FilterChain{
		{Name: "any"},
		{Name: "port-9", DestPort: 9},
		{Name: "dest-10.1", Dest: []netip.Prefix{p("10.1.0.0/16")}},
		{Name: "dest-10.1.2", Dest: []netip.Prefix{p("10.1.2.0/24")}},
		{Name: "local", Dest: []netip.Prefix{p("10.9.0.0/16")}, SourceType: 1},
		{Name: "external", Dest: []netip.Prefix{p("10.9.0.0/16")}, SourceType: 2},
		{Name: "src-port", Dest: []netip.Prefix{p("10.8.0.0/16")}, SourcePorts: []uint32{4000}},
		{Name: "src-any-port", Dest: []netip.Prefix{p("10.8.0.0/16")}},
	}, Default: &FilterChain{Name: "default"}}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct{ dst, src, want string }{
		{"10.0.0.1:8", "10.0.0.2:1", "any"},
		{"10.0.0.1:9", "10.0.0.2:1", "port-9"},
		{"10.1.3.1:8", "10.0.0.2:1", "dest-10.1"},
		{"10.1.2.1:8", "10.0.0.2:1", "dest-10.1.2"},
		{"10.9.0.1:8", "127.0.0.1:1", "local"},
		{"10.9.0.1:8", "10.7.0.1:1", "external"},
		{"10.8.0.1:8", "10.7.0.1:4000", "src-port"},
		{"10.8.0.1:8", "10.7.0.1:4001", "src-any-port"},
	} {
		if got := l.chainFor(ap(tc.dst), ap(tc.src)); got == nil || got.Name != tc.want {
			t.Errorf("%s from %s: chain %+v, want %s", tc.dst, tc.src, got, tc.want)
		}
	}
	only := &ServerListener{Chains: []FilterChain{{Name: "port-9", DestPort: 9}}, Default: &FilterChain{Name: "default"}}
	if got := only.chainFor(ap("10.0.0.1:8"), ap("10.0.0.2:1")); got == nil || got.Name != "default" {
		t.Errorf("no chain matches: %+v, want the default", got)
	}
	only.Default = nil
	if got := only.chainFor(ap("10.0.0.1:8"), ap("10.0.0.2:1")); got != nil {
		t.Errorf("no chain and no default: %+v, want none (the connection is closed)", got)
	}
}

// TestOutlierParamsAsA50: outlier_detection onto weft's keys, with
// gRPC's defaults and refusals.
func TestOutlierParamsAsA50(t *testing.T) {
	c := edsCluster("echo", clusterv3.Cluster_ROUND_ROBIN)
	c.OutlierDetection = &clusterv3.OutlierDetection{Interval: durationpb.New(2 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(20),
		EnforcingFailurePercentage: wrapperspb.UInt32(100)}
	p, err := outlierParams(c)
	want := map[string]string{"outlier": "true", "outlier.group": "echo", "outlier.interval": "2000", "outlier.max.percent": "20",
		"outlier.failure.percent": "85", "outlier.failure.min.hosts": "5", "outlier.failure.volume": "50", "outlier.consecutive.errors": "0",
		"outlier.success.stdev": "1900", "outlier.success.min.hosts": "5", "outlier.success.volume": "100"}
	if err != nil || len(p) != len(want) {
		t.Fatalf("params %v, %v; want %v", p, err, want)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	c.OutlierDetection.MaxEjectionPercent = wrapperspb.UInt32(101)
	if _, err := outlierParams(c); err == nil || err.Error() != "outlier_detection.max_ejection_percent = 101; must be <= 100" {
		t.Errorf("101%%: %v", err)
	}
}
