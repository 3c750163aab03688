package interop_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/weftrpc/weft"
)

// BenchmarkStreamOneKiB is the streaming throughput of 1 KiB messages on
// one stream, weft consumer to weft provider beside grpc-go's client to
// grpc-go's server, in one run:
//
//	cd test/interop && go test -run XX -bench StreamOneKiB -benchtime 200000x
//
// "client" is client streaming (the consumer sends b.N messages on one
// stream and the provider counts them); "server" is server streaming (the
// provider answers streamBatch messages per stream, b.N in all).
func BenchmarkStreamOneKiB(b *testing.B) {
	systems := []struct {
		name   string
		client func(b *testing.B) (streamCalls, func())
	}{
		{"grpc-go", func(b *testing.B) (streamCalls, func()) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer()
			testgrpc.RegisterTestServiceServer(gs, interop.NewTestServer())
			go gs.Serve(ln)
			cc, err := grpc.Dial(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			c := testpb.NewTestServiceClient(cc)
			return streamCalls{
				in: func(ctx context.Context) (inStream, error) { return c.StreamingInputCall(ctx) },
				out: func(ctx context.Context, r *testpb.StreamingOutputCallRequest) (outStream, error) {
					return c.StreamingOutputCall(ctx, r)
				},
			}, func() { cc.Close(); gs.Stop() }
		}},
		{"weft", func(b *testing.B) (streamCalls, func()) {
			t := &testing.T{}
			_, port := freeAddr(t)
			startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("protocols: {tri: {port: %d}}\nprovider: {services: {test: {interface: grpc.testing.TestService, protocol: tri}}}\n", port))),
				weft.WithService("test", &testService{slept: make(chan error, 1)}))
			var c testClient
			startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("consumer: {references: {test: {interface: grpc.testing.TestService, url: \"tri://127.0.0.1:%d\", timeout: 600000}}}\n", port))),
				weft.WithReference("test", &c))
			return streamCalls{
				in: func(ctx context.Context) (inStream, error) { return c.StreamingInputCall(ctx) },
				out: func(ctx context.Context, r *testpb.StreamingOutputCallRequest) (outStream, error) {
					return c.StreamingOutputCall(ctx, r)
				},
			}, func() {}
		}},
	}
	msg := &testpb.StreamingInputCallRequest{Payload: payloadOf(1024)}
	for _, sys := range systems {
		b.Run("client/"+sys.name, func(b *testing.B) {
			c, stop := sys.client(b)
			defer stop()
			st, err := c.in(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(1024)
			b.ResetTimer()
			for range b.N {
				if err := st.Send(msg); err != nil {
					b.Fatal(err)
				}
			}
			res, err := st.CloseAndRecv()
			if err != nil || int(res.GetAggregatedPayloadSize()) != b.N*1024 {
				b.Fatalf("%v %v", res, err)
			}
		})
	}
	const streamBatch = 1000
	req := &testpb.StreamingOutputCallRequest{}
	for range streamBatch {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: 1024})
	}
	for _, sys := range systems {
		b.Run("server/"+sys.name, func(b *testing.B) {
			c, stop := sys.client(b)
			defer stop()
			b.SetBytes(1024)
			b.ResetTimer()
			for got := 0; got < b.N; {
				st, err := c.out(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					m, err := st.Recv()
					if err == io.EOF {
						break
					}
					if err != nil || len(m.GetPayload().GetBody()) != 1024 {
						b.Fatalf("%v %v", m, err)
					}
					got++
				}
			}
		})
	}
}

// streamCalls opens the two streaming calls the benchmark makes, on
// grpc-go's client or weft's.
type streamCalls struct {
	in  func(ctx context.Context) (inStream, error)
	out func(ctx context.Context, r *testpb.StreamingOutputCallRequest) (outStream, error)
}

type inStream interface {
	Send(*testpb.StreamingInputCallRequest) error
	CloseAndRecv() (*testpb.StreamingInputCallResponse, error)
}

type outStream interface {
	Recv() (*testpb.StreamingOutputCallResponse, error)
}
