package xds

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resource "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcxds "google.golang.org/grpc/xds" // grpc-go's proxyless xDS client

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/echo/echopb"
	"github.com/weftrpc/weft/kernel"
)

// namedEcho is a weft provider of weftbench.echo.EchoService (protobuf IDL
// over Triple) that says who answered.
type namedEcho struct{ name string }

func (e namedEcho) Echo(_ context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) {
	return &echopb.EchoReply{Msg: e.name + ":" + in.GetMsg()}, nil
}

func startEchoProvider(t *testing.T, name string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("echo", namedEcho{name}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("protocols: {tri: {port: %d}}\nprovider: {services: {echo: {interface: %s, protocol: tri}}}\n", port, echopb.EchoServiceName))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// grpcEcho is a grpc-go server of the same service, registered by hand
// (echopb has weft's stubs, not grpc-go's).
func startGRPCEcho(t *testing.T, name string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: echopb.EchoServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Echo", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in echopb.EchoRequest
			if err := dec(&in); err != nil {
				return nil, err
			}
			return &echopb.EchoReply{Msg: name + ":" + in.GetMsg()}, nil
		}}},
	}, struct{}{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// canaryRoutes is the route both sides follow: calls with x-canary: yes
// to cluster v2, the others to v1.
func canaryRoutes() *routev3.RouteConfiguration {
	rc := routes(map[string]uint32{"v1": 1})
	header := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{{Name: "x-canary", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "yes"}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "v2"}}}}
	rc.VirtualHosts[0].Routes = append([]*routev3.Route{header}, rc.VirtualHosts[0].Routes...)
	return rc
}

// TestGRPCGoProxylessClientCallsWeftProviders: grpc-go's own xDS client
// (google.golang.org/grpc/xds, with a bootstrap naming the test's
// go-control-plane server) resolves xds:///<target> from the same
// snapshot weft's consumer reads and calls weft Triple providers; both
// pick endpoints by the same route (the header route to the canary). The
// other way, a weft consumer calls grpc-go servers the snapshot lists.
func TestGRPCGoProxylessClientCallsWeftProviders(t *testing.T) {
	cp := startControlPlane(t, "")
	stable, canary := startEchoProvider(t, "weft-stable"), startEchoProvider(t, "weft-canary")
	res := map[resource.Type][]types.Resource{
		resource.ListenerType: {listener()},
		resource.RouteType:    {canaryRoutes()},
		resource.ClusterType:  {edsCluster("v1", clusterv3.Cluster_ROUND_ROBIN), edsCluster("v2", clusterv3.Cluster_ROUND_ROBIN)},
		resource.EndpointType: {endpoints("v1", []string{stable}), endpoints("v2", []string{canary})},
	}
	cp.set(t, "1", res)

	bootstrap := fmt.Sprintf(`{"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q}}`, cp.addr, testNode)
	builder, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var out echopb.EchoReply
		err := conn.Invoke(ctx, "/"+echopb.EchoServiceName+"/Echo", &echopb.EchoRequest{Msg: "hi"}, &out)
		return out.GetMsg(), err
	}
	canaryCtx := metadata.AppendToOutgoingContext(context.Background(), "x-canary", "yes")
	for range 50 {
		plain, err := call(context.Background())
		if err != nil || plain != "weft-stable:hi" {
			t.Fatalf("grpc-go xDS client, no header: %q, %v; want weft-stable:hi", plain, err)
		}
		c, err := call(canaryCtx)
		if err != nil || c != "weft-canary:hi" {
			t.Fatalf("grpc-go xDS client, x-canary: yes: %q, %v; want weft-canary:hi", c, err)
		}
	}

	// weft's consumer on the same snapshot, then on grpc-go servers.
	var echo echopb.EchoServiceClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(Plugin()), weft.WithReference("echo", &echo),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {mesh: {address: "xds://%s?node=%s"}}
consumer:
  references:
    echo: {interface: %s, protocol: tri, provided_by: %q, timeout: 2000}
`, cp.addr, testNode, echopb.EchoServiceName, target))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	weftCall := func(ctx context.Context) (string, error) {
		out, err := echo.Echo(ctx, &echopb.EchoRequest{Msg: "hi"})
		return out.GetMsg(), err
	}
	weftCanary := kernel.WithAttachments(context.Background(), map[string]any{"x-canary": "yes"})
	waitAnswers(t, "weft consumer, weft providers", weftCall, weftCanary, "weft-stable:hi", "weft-canary:hi")

	gs, gc := startGRPCEcho(t, "grpc-stable"), startGRPCEcho(t, "grpc-canary")
	res[resource.EndpointType] = []types.Resource{endpoints("v1", []string{gs}), endpoints("v2", []string{gc})}
	cp.set(t, "2", res)
	waitAnswers(t, "weft consumer, grpc-go servers", weftCall, weftCanary, "grpc-stable:hi", "grpc-canary:hi")
	// And grpc-go's client follows the same change.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		plain, err1 := call(context.Background())
		c, err2 := call(canaryCtx)
		if err1 == nil && err2 == nil && plain == "grpc-stable:hi" && c == "grpc-canary:hi" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grpc-go xDS client after the change: %q (%v), %q (%v)", plain, err1, c, err2)
		}
	}
}

// waitAnswers waits until the plain call answers plain and the canary
// call canary, then checks 50 more of each.
func waitAnswers(t *testing.T, what string, call func(context.Context) (string, error), canaryCtx context.Context, plain, canary string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err1 := call(context.Background())
		c, err2 := call(canaryCtx)
		if err1 == nil && err2 == nil && p == plain && c == canary {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q (%v), %q (%v); want %s and %s", what, p, err1, c, err2, plain, canary)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 50 {
		p, err1 := call(context.Background())
		c, err2 := call(canaryCtx)
		if err1 != nil || err2 != nil || p != plain || c != canary {
			t.Fatalf("%s: %q (%v), %q (%v); want %s and %s", what, p, err1, c, err2, plain, canary)
		}
	}
}
