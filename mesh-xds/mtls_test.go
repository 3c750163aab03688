package xds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

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

	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(Plugin()), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {mesh: {address: "xds://?bootstrap=%s"}}
consumer:
  references:
    node: {interface: org.weft.Node, protocol: tri, provided_by: %q, timeout: 2000}
`, bootstrap, target))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
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
	l := startLoad(8, &c)

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
