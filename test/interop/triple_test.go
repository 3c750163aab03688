package interop_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple"
	"github.com/weftrpc/weft/proxy"
)

// testService is grpc.testing.TestService's unary part as a weft service:
// plain Go methods taking and returning the protobuf messages grpc-go's
// interop suite generates.
type testService struct {
	slept chan error // what a sleeping call's context said when it ended
}

func (s *testService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (s *testService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	echoMetadata(ctx)
	if st := in.GetResponseStatus(); st != nil && st.GetCode() != 0 {
		// The interop suite's status_code_and_message: a business error
		// carries its text; its code is UNKNOWN (2), which is what the
		// suite sends.
		return nil, errors.New(st.GetMessage())
	}
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		if v, ok := inv.Attachment("x-grpc-test-echo-trailing-bin"); ok {
			kernel.SetReplyAttachment(ctx, "x-grpc-test-echo-trailing-bin", v)
		}
		if v := inv.AttachmentString("x-user"); v != "" {
			kernel.SetReplyAttachment(ctx, "x-user-seen", v)
		}
	}
	if in.GetFillUsername() {
		return &testpb.SimpleResponse{Username: "weft"}, nil
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseSize())}}, nil
}

// echoMetadata is the interop suite's custom_metadata: the initial value
// comes back as a response header, the trailing one in the trailers.
func echoMetadata(ctx context.Context) {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return
	}
	if v := inv.AttachmentString("x-grpc-test-echo-initial"); v != "" {
		triple.SetHeader(ctx, "x-grpc-test-echo-initial", v)
	}
	if v, ok := inv.Attachment("x-grpc-test-echo-trailing-bin"); ok {
		kernel.SetReplyAttachment(ctx, "x-grpc-test-echo-trailing-bin", v)
	}
}

func payloadOf(size int32) *testpb.Payload {
	return &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, size)}
}

// StreamingOutputCall is server streaming: one answer per response
// parameter, after its interval.
func (s *testService) StreamingOutputCall(ctx context.Context, in *testpb.StreamingOutputCallRequest,
	out *proxy.ServerStream[*testpb.StreamingOutputCallResponse]) error {
	for _, p := range in.GetResponseParameters() {
		if us := p.GetIntervalUs(); us > 0 {
			time.Sleep(time.Duration(us) * time.Microsecond)
		}
		if err := out.Send(&testpb.StreamingOutputCallResponse{Payload: payloadOf(p.GetSize())}); err != nil {
			return err
		}
	}
	return nil
}

// StreamingInputCall is client streaming: the sum of the payload sizes.
func (s *testService) StreamingInputCall(ctx context.Context, in *proxy.ClientStream[*testpb.StreamingInputCallRequest]) (*testpb.StreamingInputCallResponse, error) {
	sum := 0
	for {
		m, err := in.Recv()
		if err == io.EOF {
			return &testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(sum)}, nil
		}
		if err != nil {
			return nil, err
		}
		sum += len(m.GetPayload().GetBody())
	}
}

// FullDuplexCall is bidirectional: each request's response parameters are
// answered as it comes; a response status ends the call with it.
func (s *testService) FullDuplexCall(ctx context.Context, st *proxy.BidiStream[*testpb.StreamingOutputCallRequest, *testpb.StreamingOutputCallResponse]) error {
	echoMetadata(ctx)
	for {
		in, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if rs := in.GetResponseStatus(); rs != nil && rs.GetCode() != 0 {
			return errors.New(rs.GetMessage())
		}
		for _, p := range in.GetResponseParameters() {
			if us := p.GetIntervalUs(); us > 0 {
				time.Sleep(time.Duration(us) * time.Microsecond)
			}
			if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: payloadOf(p.GetSize())}); err != nil {
				return err
			}
		}
	}
}

// Sleep is not in TestService: it waits for its deadline, to show that the
// client's grpc-timeout reaches the provider.
func (s *testService) Sleep(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	select {
	case <-ctx.Done():
		s.slept <- ctx.Err()
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		s.slept <- nil
		return &testpb.Empty{}, nil
	}
}

func startTriple(t *testing.T) (*testService, *grpc.ClientConn) {
	t.Helper()
	addr, port := freeAddr(t)
	svc := &testService{slept: make(chan error, 1)}
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", svc))
	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return svc, cc
}

// TestGRPCGoClientUnary runs the unary cases of grpc-go's interop suite
// (interop/test_utils.go) with grpc-go's own client against a weft Triple
// provider.
func TestGRPCGoClientUnary(t *testing.T) {
	_, cc := startTriple(t)
	tc := testpb.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("empty_unary", func(t *testing.T) {
		if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("large_unary", func(t *testing.T) {
		// The suite's sizes: a 271828-byte request, a 314159-byte answer
		// (over HTTP/2's 64 KiB initial windows and 16 KiB frames).
		req := &testpb.SimpleRequest{ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseSize: 314159,
			Payload: &testpb.Payload{Body: make([]byte, 271828)}}
		res, err := tc.UnaryCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.GetPayload().GetBody()); n != 314159 {
			t.Fatalf("payload of %d bytes, want 314159", n)
		}
	})
	t.Run("status_code_and_message", func(t *testing.T) {
		const msg = "test status message"
		_, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: 2, Message: msg}})
		if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != msg {
			t.Fatalf("got %v, want code Unknown and %q", err, msg)
		}
	})
	t.Run("special_status_message", func(t *testing.T) {
		const msg = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
		_, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: 2, Message: msg}})
		if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != msg {
			t.Fatalf("got %v, want code Unknown and %q", err, msg)
		}
	})
	t.Run("custom_metadata", func(t *testing.T) {
		trailing := []byte{0xab, 0xab, 0xab}
		mctx := metadata.AppendToOutgoingContext(ctx, "x-user", "ann", "x-grpc-test-echo-trailing-bin", string(trailing))
		var tr metadata.MD
		if _, err := tc.UnaryCall(mctx, &testpb.SimpleRequest{ResponseSize: 1}, grpc.Trailer(&tr)); err != nil {
			t.Fatal(err)
		}
		if got := tr.Get("x-grpc-test-echo-trailing-bin"); len(got) != 1 || got[0] != string(trailing) {
			t.Fatalf("trailing metadata %v, want the binary value echoed", tr)
		}
		if got := tr.Get("x-user-seen"); len(got) != 1 || got[0] != "ann" {
			t.Fatalf("trailing metadata %v, want x-user-seen: ann", tr)
		}
	})
	t.Run("unimplemented_method", func(t *testing.T) {
		err := cc.Invoke(ctx, "/grpc.testing.TestService/UnimplementedCall", &testpb.Empty{}, &testpb.Empty{})
		if st, _ := status.FromError(err); st.Code() != codes.Unimplemented {
			t.Fatalf("got %v, want Unimplemented", err)
		}
	})
	t.Run("unimplemented_service", func(t *testing.T) {
		err := cc.Invoke(ctx, "/grpc.testing.UnimplementedService/UnimplementedCall", &testpb.Empty{}, &testpb.Empty{})
		if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "grpc.testing.TestService") {
			t.Fatalf("got %v, want Unimplemented naming the services there are", err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		concurrent(t, func(i int) error {
			res, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: int32(i * 100)})
			if err == nil && len(res.GetPayload().GetBody()) != i*100 {
				err = fmt.Errorf("call %d: %d bytes", i, len(res.GetPayload().GetBody()))
			}
			return err
		})
	})
}

// TestGRPCGoDeadlineReachesTripleProvider: the client's deadline goes as
// grpc-timeout and ends the provider's context, not only the client's wait.
func TestGRPCGoDeadlineReachesTripleProvider(t *testing.T) {
	svc, cc := startTriple(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := cc.Invoke(ctx, "/grpc.testing.TestService/Sleep", &testpb.Empty{}, &testpb.Empty{})
	if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	select {
	case err := <-svc.slept:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("provider's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's call did not end with the client's deadline")
	}
}

// testClient is a weft stub of grpc.testing.TestService: the tags give the
// methods' gRPC names.
type testClient struct {
	EmptyCall           func(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error)                                                                       `weft:"EmptyCall"`
	UnaryCall           func(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error)                                                      `weft:"UnaryCall"`
	Missing             func(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error)                                                                       `weft:"UnimplementedCall"`
	StreamingOutputCall func(ctx context.Context, in *testpb.StreamingOutputCallRequest) (*proxy.ServerStreamClient[*testpb.StreamingOutputCallResponse], error) `weft:"StreamingOutputCall"`
	StreamingInputCall  func(ctx context.Context) (*proxy.ClientStreamClient[*testpb.StreamingInputCallRequest, *testpb.StreamingInputCallResponse], error)      `weft:"StreamingInputCall"`
	FullDuplexCall      func(ctx context.Context) (*proxy.BidiStreamClient[*testpb.StreamingOutputCallRequest, *testpb.StreamingOutputCallResponse], error)      `weft:"FullDuplexCall"`
}

// TestWeftConsumerToGRPCGoServer: a weft consumer (App, cluster, filters,
// stub) calls grpc-go's own interop server over Triple.
func TestWeftConsumerToGRPCGoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(gs, interop.NewTestServer())
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)

	var c testClient
	app := startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    test: {interface: grpc.testing.TestService, url: "tri://%s", timeout: 5000, retries: 0}
`, ln.Addr()))),
		weft.WithReference("test", &c))
	ctx := context.Background()

	if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatalf("empty_unary: %v", err)
	}
	res, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseSize: 314159,
		Payload: &testpb.Payload{Body: make([]byte, 271828)}})
	if err != nil || len(res.GetPayload().GetBody()) != 314159 {
		t.Fatalf("large_unary: %v", err)
	}
	const msg = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
	_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: 2, Message: msg}})
	if !kernel.IsBiz(err) || err.Error() != msg {
		t.Fatalf("special_status_message: %q (biz %t)", err, kernel.IsBiz(err))
	}
	_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.PermissionDenied), Message: "no"}})
	if kernel.CodeOf(err) != kernel.CodeForbidden {
		t.Fatalf("PERMISSION_DENIED: %v (code %v), want forbidden", err, kernel.CodeOf(err))
	}
	if _, err := c.Missing(ctx, &testpb.Empty{}); kernel.CodeOf(err) != kernel.CodeMethodNotFound {
		t.Fatalf("unimplemented_method: %v (code %v)", err, kernel.CodeOf(err))
	}
	// Metadata both ways, through the generic invoker.
	ref, err := app.Reference("test")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("UnaryCall", &testpb.SimpleRequest{ResponseSize: 1})
	inv.SetAttachment("x-grpc-test-echo-trailing-bin", []byte{0xab, 0xab, 0xab})
	r, err := ref.Invoke(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Attachments["x-grpc-test-echo-trailing-bin"].([]byte); string(got) != "\xab\xab\xab" {
		t.Fatalf("trailing metadata: %v", r.Attachments)
	}
	concurrent(t, func(i int) error {
		res, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: int32(i * 100)})
		if err == nil && len(res.GetPayload().GetBody()) != i*100 {
			err = fmt.Errorf("call %d: %d bytes", i, len(res.GetPayload().GetBody()))
		}
		return err
	})
}

// TestGRPCHealthProbe: grpc-go's health client (what grpc_health_probe and
// Kubernetes' gRPC probes use) asks a weft Triple server.
func TestGRPCHealthProbe(t *testing.T) {
	_, cc := startTriple(t)
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, svc := range []string{"", "grpc.testing.TestService"} {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q): %v %v, want SERVING", svc, res, err)
		}
	}
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.Such"})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound {
		t.Fatalf("Check of an unknown service: %v, want NotFound", err)
	}
}

// buildGRPCInteropClient builds the gRPC project's interop client from the
// module proxy (test/grpc-interop pins it).
func buildGRPCInteropClient(t *testing.T) string {
	t.Helper()
	return buildTool(t, "google.golang.org/grpc/interop/client")
}

// buildTool builds one of test/grpc-interop's tools.
func buildTool(t *testing.T, pkg string) string {
	t.Helper()
	return goBuild(t, "../grpc-interop", pkg)
}

// TestGRPCInteropClient runs grpc-go's own interop client, test case by test
// case, against a weft Triple provider of grpc.testing.TestService.
func TestGRPCInteropClient(t *testing.T) {
	bin := buildGRPCInteropClient(t)
	_, port := freeAddr(t)
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", &testService{slept: make(chan error, 1)}))
	for _, tc := range []string{"empty_unary", "large_unary", "client_streaming", "server_streaming", "ping_pong",
		"empty_stream", "timeout_on_sleeping_server", "cancel_after_begin", "cancel_after_first_response",
		"status_code_and_message", "special_status_message", "custom_metadata", "unimplemented_method",
		"unimplemented_service"} {
		t.Run(tc, func(t *testing.T) {
			cmd := exec.Command(bin, "-server_host", "127.0.0.1", "-server_port", fmt.Sprint(port), "-test_case", tc)
			cmd.Env = append(os.Environ(), "GRPC_GO_LOG_SEVERITY_LEVEL=info")
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("%s did not finish in 60 s:\n%s", tc, out)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc, err, out)
			}
			// The client logs "[interop] <Case> done" when a case passed
			// (and exits 1 when it failed).
			passed := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "[interop]") && strings.HasSuffix(strings.TrimSpace(l), " done") {
					passed = strings.TrimSpace(l)
				}
			}
			if passed == "" {
				t.Fatalf("%s: no success line in the client's output:\n%s", tc, out)
			}
			t.Log(passed)
		})
	}
}

// TestGrpcurl: grpcurl (from the module proxy) lists, describes and calls a
// weft Triple provider through server reflection, and probes its health.
func TestGrpcurl(t *testing.T) {
	bin := buildTool(t, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	addr, port := freeAddr(t)
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", &testService{slept: make(chan error, 1)}))
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"-plaintext", "-max-time", "20"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(addr, "list"); !strings.Contains(out, "grpc.testing.TestService") || !strings.Contains(out, "grpc.health.v1.Health") {
		t.Fatalf("list:\n%s", out)
	}
	if out := run(addr, "describe", "grpc.testing.TestService"); !strings.Contains(out, "rpc FullDuplexCall ( stream .grpc.testing.StreamingOutputCallRequest ) returns ( stream .grpc.testing.StreamingOutputCallResponse )") {
		t.Fatalf("describe:\n%s", out)
	}
	if out := run("-d", `{"fill_username": true}`, addr, "grpc.testing.TestService/UnaryCall"); !strings.Contains(out, `"username": "weft"`) {
		t.Fatalf("UnaryCall:\n%s", out)
	}
	if out := run("-d", `{"response_parameters": [{"size": 3}, {"size": 4}]}`, addr, "grpc.testing.TestService/StreamingOutputCall"); strings.Count(out, `"payload"`) != 2 {
		t.Fatalf("StreamingOutputCall:\n%s", out)
	}
	if out := run(addr, "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Fatalf("health:\n%s", out)
	}
}

// streamingCases are grpc-go's interop streaming cases (interop/test_utils.go),
// made by a weft consumer through its stub.
func streamingCases(t *testing.T, c *testClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sizes := []int32{31415, 9, 2653, 58979}
	t.Run("server_streaming", func(t *testing.T) {
		req := &testpb.StreamingOutputCallRequest{}
		for _, n := range sizes {
			req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
		}
		st, err := c.StreamingOutputCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			m, err := st.Recv()
			if err != nil || int32(len(m.GetPayload().GetBody())) != n {
				t.Fatalf("answer %d: %d bytes, %v; want %d", i, len(m.GetPayload().GetBody()), err, n)
			}
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("after the last answer: %v, want EOF", err)
		}
	})
	t.Run("client_streaming", func(t *testing.T) {
		st, err := c.StreamingInputCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, n := range []int{27182, 8, 1828, 45904} {
			if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payloadOf(int32(n))}); err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		res, err := st.CloseAndRecv()
		if err != nil || int(res.GetAggregatedPayloadSize()) != sum {
			t.Fatalf("aggregated %d, %v; want %d", res.GetAggregatedPayloadSize(), err, sum)
		}
	})
	t.Run("client_streaming_past_the_windows", func(t *testing.T) {
		// 4 MiB on one stream: past the provider's stream window (1 MiB),
		// so the windows must come back as the provider receives.
		st, err := c.StreamingInputCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4096 {
			if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payloadOf(1024)}); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		res, err := st.CloseAndRecv()
		if err != nil || res.GetAggregatedPayloadSize() != 4096*1024 {
			t.Fatalf("aggregated %d, %v", res.GetAggregatedPayloadSize(), err)
		}
	})
	t.Run("server_streaming_past_the_windows", func(t *testing.T) {
		req := &testpb.StreamingOutputCallRequest{}
		for range 2048 {
			req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: 1024})
		}
		st, err := c.StreamingOutputCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2048 {
			if m, err := st.Recv(); err != nil || len(m.GetPayload().GetBody()) != 1024 {
				t.Fatalf("answer %d: %v", i, err)
			}
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("after the last: %v", err)
		}
	})
	t.Run("ping_pong", func(t *testing.T) {
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			if err := st.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: n}},
				Payload: payloadOf(int32(i * 1000))}); err != nil {
				t.Fatal(err)
			}
			m, err := st.Recv()
			if err != nil || int32(len(m.GetPayload().GetBody())) != n {
				t.Fatalf("pong %d: %d bytes, %v", i, len(m.GetPayload().GetBody()), err)
			}
		}
		st.CloseSend()
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("after CloseSend: %v, want EOF", err)
		}
	})
	t.Run("empty_stream", func(t *testing.T) {
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("%v, want EOF", err)
		}
	})
	t.Run("status_over_stream", func(t *testing.T) {
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&testpb.StreamingOutputCallRequest{ResponseStatus: &testpb.EchoStatus{Code: 2, Message: "test status message"}})
		if _, err := st.Recv(); !kernel.IsBiz(err) || err.Error() != "test status message" {
			t.Fatalf("%v (biz %t), want the status message as a business error", err, kernel.IsBiz(err))
		}
	})
	t.Run("cancel_after_first_response", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		st, err := c.FullDuplexCall(cctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 31415}}})
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		ccancel()
		if _, err := st.Recv(); !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v, want Canceled", err)
		}
	})
	t.Run("timeout_on_sleeping_server", func(t *testing.T) {
		tctx, tcancel := context.WithTimeout(ctx, time.Millisecond)
		defer tcancel()
		st, err := c.FullDuplexCall(tctx)
		if err == nil {
			st.Send(&testpb.StreamingOutputCallRequest{Payload: payloadOf(27182)})
			_, err = st.Recv()
		}
		if kernel.CodeOf(err) != kernel.CodeTimeout && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v (code %v), want a timeout", err, kernel.CodeOf(err))
		}
	})
}

// TestWeftConsumerStreams runs the streaming cases from a weft consumer,
// against grpc-go's interop server and against a weft provider.
func TestWeftConsumerStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(gs, interop.NewTestServer())
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	_, port := freeAddr(t)
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", &testService{slept: make(chan error, 1)}))
	for _, target := range []struct{ name, addr string }{{"grpc-go", ln.Addr().String()}, {"weft", fmt.Sprintf("127.0.0.1:%d", port)}} {
		t.Run(target.name, func(t *testing.T) {
			var c testClient
			startWeft(t,
				weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    test: {interface: grpc.testing.TestService, url: "tri://%s", timeout: 5000, retries: 0}
`, target.addr))),
				weft.WithReference("test", &c))
			streamingCases(t, &c)
		})
	}
}

// TestTripleOverTLS: Triple with the TLS config of the security issue (a
// client certificate required): grpc-go's client, which insists on ALPN
// h2, and a weft consumer call a weft provider.
func TestTripleOverTLS(t *testing.T) {
	ca := testpki.NewCA(t, "triple CA")
	srv, cli := writePKI(t, ca, "127.0.0.1"), writePKI(t, ca, "127.0.0.1")
	addr, port := freeAddr(t)
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(srv.yaml()+fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", &testService{slept: make(chan error, 1)}))

	pair, err := tls.LoadX509KeyPair(cli.cert, cli.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(ca.PEM))
	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{FillUsername: true})
	if err != nil || res.GetUsername() != "weft" {
		t.Fatalf("grpc-go over TLS: %v %v", res, err)
	}
	// Without a client certificate: refused, and the error says why.
	bare, err := grpc.Dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := testpb.NewTestServiceClient(bare).EmptyCall(ctx, &testpb.Empty{}); err == nil {
		t.Fatal("a client without a certificate was served")
	}

	var c testClient
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(cli.yaml()+fmt.Sprintf(`
consumer:
  references:
    test: {interface: grpc.testing.TestService, url: "tri://%s", timeout: 5000, retries: 0}
`, addr))),
		weft.WithReference("test", &c))
	if r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{FillUsername: true}); err != nil || r.GetUsername() != "weft" {
		t.Fatalf("weft consumer over TLS: %v %v", r, err)
	}
}

// TestTripleGzip: gzip both ways: grpc-go's client compresses its requests
// to a weft provider (unary and streaming), and a grpc-go server that
// compresses its answers is read by a weft consumer (which says it takes
// gzip).
func TestTripleGzip(t *testing.T) {
	_, cc := startTriple(t)
	tc := testpb.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 10, Payload: payloadOf(50000)}, grpc.UseCompressor(gzip.Name))
	if err != nil || len(res.GetPayload().GetBody()) != 10 {
		t.Fatalf("gzip unary: %v", err)
	}
	st, err := tc.StreamingInputCall(ctx, grpc.UseCompressor(gzip.Name))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payloadOf(20000)}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := st.CloseAndRecv(); err != nil || r.GetAggregatedPayloadSize() != 60000 {
		t.Fatalf("gzip stream: %v %v", r, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The server compresses its answer (SetSendCompressor) when the client
	// says it takes gzip, and records that it did: a weft consumer that
	// reads the answer has then read a compressed one.
	var compressed atomic.Int64
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := grpc.SetSendCompressor(ctx, gzip.Name); err == nil {
			compressed.Add(1)
		}
		return h(ctx, req)
	}))
	testgrpc.RegisterTestServiceServer(gs, interop.NewTestServer())
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	var c testClient
	startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    test: {interface: grpc.testing.TestService, url: "tri://%s", timeout: 5000, retries: 0}
`, ln.Addr()))), weft.WithReference("test", &c))
	if r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 30000}); err != nil || len(r.GetPayload().GetBody()) != 30000 {
		t.Fatalf("a gzip answer to a weft consumer: %v", err)
	}
	if compressed.Load() != 1 {
		t.Fatal("grpc-go's server did not compress its answer: the consumer did not say it takes gzip")
	}
}
