package xds

import (
	"testing"
	"time"

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
// route's retry policy, else the virtual host's (A44); at most 5 attempts.
func TestRoutePolicies(t *testing.T) {
	vhRetry := &RetryConfig{On: map[int]bool{kernel.GRPCUnavailable: true}, NumRetries: 9, BackoffBase: time.Millisecond, BackoffMax: time.Second}
	routeRetry := &RetryConfig{}
	vh := &VirtualHost{Retry: vhRetry, Routes: []Route{
		{Timeout: 0, HasTimeout: true, Retry: routeRetry}, // explicit 0: no timeout; its own (empty) policy
		{Timeout: 3 * time.Second, HasTimeout: true},
		{},
	}}
	st := newRouteState(vh, time.Second)
	p0, p1, p2 := st.policies[0], st.policies[1], st.policies[2]
	if p0.Timeout != 0 || p0.Retry.Retries != 0 {
		t.Errorf("route 0: %+v %+v", p0, p0.Retry)
	}
	if p1.Timeout != 3*time.Second || p1.Retry.Retries != 4 {
		t.Errorf("route 1: timeout %v, retries %d; want 3s and the vhost's 9 capped at 4", p1.Timeout, p1.Retry.Retries)
	}
	if p2.Timeout != time.Second {
		t.Errorf("route 2: timeout %v, want the listener's 1s", p2.Timeout)
	}
	unavailable := kernel.Errorf(kernel.CodeNetwork, "down")
	if !p1.Retry.On(unavailable) || p1.Retry.On(kernel.Errorf(kernel.CodeTimeout, "slow")) {
		t.Error("the vhost's policy retries other codes than UNAVAILABLE")
	}
	if st := newRouteState(&VirtualHost{Routes: []Route{{}}}, 0); st.policies[0] != nil {
		t.Errorf("no timeout nor retry: policy %+v, want none", st.policies[0])
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
