package xds

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
)

// securedCluster is an EDS cluster whose connections are mTLS with the
// bootstrap's "default" certificate provider (new fields for the
// identity, Istio's deprecated combined validation context for the roots)
// and whose providers must be san.
func securedCluster(t *testing.T, name, san string) *clusterv3.Cluster {
	t.Helper()
	up, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "default"},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext: &tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{
				{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}}}},
			ValidationContextCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "default"},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := edsCluster(name, clusterv3.Cluster_ROUND_ROBIN)
	c.TransportSocket = &corev3.TransportSocket{Name: tlsTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: up}}
	return c
}

// headerRoute sends calls with header: yes to cluster.
func headerRoute(header, cluster string) *routev3.Route {
	return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{{Name: header, HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "yes"}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}}}
}

// TestMeshMTLSFromFileWatcher: a weft consumer dials the providers of a
// cluster whose UpstreamTlsContext names the bootstrap's file_watcher
// certificate provider with mutual TLS; a provider that does not trust
// the consumer's certificate refuses it with a clear error, as does the
// consumer a provider whose name the cluster does not allow; a rotated
// identity (written and renamed, as Istio's agent does) is used by the
// next connection while 8 callers go on with 0 failed calls.
func TestMeshMTLSFromFileWatcher(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p+".new", []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mesh, other := testpki.NewCA(t, "mesh root"), testpki.NewCA(t, "another mesh")
	const nodeSA, clientSA = "spiffe://cluster.local/ns/default/sa/node", "spiffe://cluster.local/ns/default/sa/client"
	day := time.Now().Add(24 * time.Hour)
	sc, sk := mesh.IssueURI(t, "node", day, nodeSA)
	srvCert, srvKey := write("node-cert.pem", sc), write("node-key.pem", sk)
	providerTLS := func(ca string) string {
		return fmt.Sprintf("tls: {ca-cert-file: %q, tls-cert-file: %q, tls-key-file: %q}\n", ca, srvCert, srvKey)
	}
	// trusting takes clients of either mesh; strict only the other's.
	trusting, trustingAddr, _ := startProviderWith(t, "trusting", providerTLS(write("both.pem", mesh.PEM+other.PEM)), "")
	_, strictAddr, _ := startProviderWith(t, "strict", providerTLS(write("other.pem", other.PEM)), "")

	cc, ck := mesh.IssueURI(t, "client", day, clientSA)
	idCert, idKey, roots := write("cert-chain.pem", cc), write("key.pem", ck), write("root-cert.pem", mesh.PEM)
	cp := startControlPlane(t, "")
	bootstrap := write("grpc-bootstrap.json", fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": %q},
  "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
    "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "0.1s"}}}
}`, cp.addr, testNode, idCert, idKey, roots))

	rc := routes(map[string]uint32{"node": 1})
	vh := rc.VirtualHosts[0]
	vh.Routes = append([]*routev3.Route{headerRoute("x-strict", "strict"), headerRoute("x-wrong-name", "wrongname")}, vh.Routes...)
	res := map[resource.Type][]types.Resource{
		resource.ListenerType: {listener()},
		resource.RouteType:    {rc},
		resource.ClusterType: {securedCluster(t, "node", nodeSA), securedCluster(t, "strict", nodeSA),
			securedCluster(t, "wrongname", "spiffe://cluster.local/ns/default/sa/someone-else")},
		resource.EndpointType: {endpoints("node", []string{trustingAddr}), endpoints("strict", []string{strictAddr}),
			endpoints("wrongname", []string{trustingAddr})},
	}
	cp.set(t, "1", res)

	c := startConsumerAt(t, "xds://?bootstrap="+bootstrap)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		who, err := c.Who(ctx, "x")
		if err == nil && who == "trusting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mTLS call reached the provider: %q, %v", who, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	l := startLoad(8, c)

	// A provider that does not trust the consumer's CA refuses it.
	strict := kernel.WithAttachments(ctx, map[string]any{"x-strict": "yes"})
	// Every call fails; its error says why once the cluster's endpoints
	// are known (a call may also meet the moment the connection, up for
	// the client under TLS 1.3, reads the provider's refusal).
	refusedBy := func(what string, ctx context.Context, why string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			who, err := c.Who(ctx, "x")
			if err == nil {
				t.Fatalf("%s: %q answered", what, who)
			}
			if strings.Contains(err.Error(), why) {
				t.Logf("%s: %v", what, err)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the error does not say why: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	refusedBy("a provider that does not trust the consumer", strict, "does not accept this side's certificate")
	// A provider whose name the cluster does not allow is refused by the
	// consumer.
	refusedBy("a provider the cluster's match_subject_alt_names refuse", kernel.WithAttachments(ctx, map[string]any{"x-wrong-name": "yes"}),
		"matches none of the cluster's match_subject_alt_names")

	// The identity rotates to one of the other mesh: the strict provider
	// takes the next connection; the calls in flight go on.
	cc, ck = other.IssueURI(t, "client", day, clientSA)
	write("key.pem", ck)
	write("cert-chain.pem", cc)
	deadline = time.Now().Add(15 * time.Second)
	for {
		who, err := c.Who(strict, "x")
		if err == nil && who == "strict" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not used: %q, %v", who, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	l.stop(t)
	t.Logf("%d calls over mTLS under 8 callers through the rotation, %d failed; trusting answered %d", l.calls.Load(), l.failed.Load(), trusting.calls.Load())
}

// inboundListener is a provider's inbound listener for host:port with one
// filter chain: mTLS from the bootstrap's "default" provider when mtls,
// else plaintext.
func inboundListener(t *testing.T, name, addr string, mtls bool) *listenerv3.Listener {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	router, _ := anypb.New(&routerv3.Router{})
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "inbound"}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	fc := &listenerv3.FilterChain{Name: "inbound", Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}
	if mtls {
		down, err := anypb.New(&tlsv3.DownstreamTlsContext{RequireClientCertificate: wrapperspb.Bool(true), CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "default"},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "default"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		fc.TransportSocket = &corev3.TransportSocket{Name: tlsTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: down}}
	}
	return &listenerv3.Listener{Name: name, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}}}}, FilterChains: []*listenerv3.FilterChain{fc}}
}

// TestMeshInboundListenerSecuresTheProvider: a provider whose protocol
// names the xds security serves each connection as its inbound listener
// (A36) says, with no tls block of its own: mutual TLS from the
// bootstrap's file_watcher material, which the mesh's consumer meets and
// a plain client cannot; then, the listener changed to plaintext, plain
// clients are served. Until its listener comes, it serves no one.
func TestMeshInboundListenerSecuresTheProvider(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mesh := testpki.NewCA(t, "mesh root")
	day := time.Now().Add(24 * time.Hour)
	roots := write("root-cert.pem", mesh.PEM)
	sc, sk := mesh.IssueURI(t, "node", day, "spiffe://cluster.local/ns/default/sa/node")
	cc, ck := mesh.IssueURI(t, "client", day, "spiffe://cluster.local/ns/default/sa/client")
	cp := startControlPlane(t, "")
	bootstrap := func(name, cert, key string) string {
		return write(name, fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}]}],
  "node": {"id": %q},
  "server_listener_resource_name_template": "weft.test/inbound/%%s",
  "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
    "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "0.1s"}}}
}`, cp.addr, testNode, cert, key, roots))
	}
	providerBootstrap := bootstrap("provider.json", write("node-cert.pem", sc), write("node-key.pem", sk))
	consumerBootstrap := bootstrap("consumer.json", write("cert-chain.pem", cc), write("key.pem", ck))

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	n := &node{name: "meshed"}
	prov, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(Plugin()), weft.WithService("node", n),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {host: 127.0.0.1, port: %d, params: {security: xds, xds.bootstrap: %q}}}
provider: {services: {node: {interface: org.weft.Node, protocol: tri}}}
`, port, providerBootstrap))))
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Stop(context.Background()) })

	// A plain client, by the provider's address.
	var plain nodeClient
	papp, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithReference("node", &plain),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer: {references: {node: {interface: org.weft.Node, protocol: tri, url: "tri://%s", timeout: 1000, check: false}}}
`, addr))))
	if err != nil {
		t.Fatal(err)
	}
	if err := papp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { papp.Stop(context.Background()) })
	ctx := context.Background()
	if who, err := plain.Who(ctx, "x"); err == nil {
		t.Fatalf("before its inbound listener the provider served %q", who)
	}

	inbound := "weft.test/inbound/" + addr
	res := snapshot(map[string]uint32{"node": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("node", []string{addr}))
	res[resource.ClusterType] = []types.Resource{securedCluster(t, "node", "spiffe://cluster.local/ns/default/sa/node")}
	res[resource.ListenerType] = append(res[resource.ListenerType], inboundListener(t, inbound, addr, true))
	cp.set(t, "1", res)

	c := startConsumerAt(t, "xds://?bootstrap="+consumerBootstrap)
	deadline := time.Now().Add(10 * time.Second)
	for {
		who, err := c.Who(ctx, "x")
		if err == nil && who == "meshed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mesh's consumer never reached the provider over mTLS: %q, %v", who, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	l := startLoad(8, c)
	// The plain client reconnects (every 2 s) and is told why.
	deadline = time.Now().Add(10 * time.Second)
	for {
		who, err := plain.Who(ctx, "x")
		if err == nil {
			t.Fatalf("a plain client got %q from a provider whose inbound listener says mTLS", who)
		}
		if strings.Contains(err.Error(), "takes TLS connections only") {
			t.Logf("a plain client of the mTLS provider: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plain client is not told why: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The listener says plaintext now: new plain connections are served
	// (the mesh's consumer, whose cluster still says mTLS, keeps its
	// connection).
	res[resource.ListenerType] = []types.Resource{listener(), inboundListener(t, inbound, addr, false)}
	cp.set(t, "2", res)
	deadline = time.Now().Add(15 * time.Second)
	for {
		who, err := plain.Who(ctx, "x")
		if err == nil && who == "meshed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plaintext listener was not applied: %q, %v", who, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.stop(t)
	t.Logf("%d calls of the mesh's consumer over the xDS-secured provider, %d failed", l.calls.Load(), l.failed.Load())
}
