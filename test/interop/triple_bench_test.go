package interop_test

import (
	"context"
	"fmt"
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
// one stream (client streaming: the consumer sends b.N messages, the
// provider counts them), weft consumer to weft provider beside grpc-go's
// client to grpc-go's server, in one run:
//
//	cd test/interop && go test -run XX -bench StreamOneKiB -benchtime 200000x
func BenchmarkStreamOneKiB(b *testing.B) {
	msg := &testpb.StreamingInputCallRequest{Payload: payloadOf(1024)}
	b.Run("grpc-go", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		gs := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(gs, interop.NewTestServer())
		go gs.Serve(ln)
		defer gs.Stop()
		cc, err := grpc.Dial(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		st, err := testpb.NewTestServiceClient(cc).StreamingInputCall(context.Background())
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
	b.Run("weft", func(b *testing.B) {
		t := &testing.T{}
		_, port := freeAddr(t)
		startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("protocols: {tri: {port: %d}}\nprovider: {services: {test: {interface: grpc.testing.TestService, protocol: tri}}}\n", port))),
			weft.WithService("test", &testService{slept: make(chan error, 1)}))
		var c testClient
		startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("consumer: {references: {test: {interface: grpc.testing.TestService, url: \"tri://127.0.0.1:%d\", timeout: 600000}}}\n", port))),
			weft.WithReference("test", &c))
		st, err := c.StreamingInputCall(context.Background())
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
