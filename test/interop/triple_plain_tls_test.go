package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
)

// TestGRPCGoPlaintextToTLSTriple: grpc-go's client without TLS calling a
// weft Triple port that takes TLS only is told why: the server answers its
// call with status UNAVAILABLE saying it takes TLS only and what to
// configure (then GOAWAY INADEQUATE_SECURITY). With the GOAWAY alone
// grpc-go 1.59 retried the call and reported only "use of closed network
// connection".
func TestGRPCGoPlaintextToTLSTriple(t *testing.T) {
	ca := testpki.NewCA(t, "triple CA")
	srv := writePKI(t, ca, "127.0.0.1")
	addr, port := freeAddr(t)
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(srv.yaml()+fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    test: {interface: grpc.testing.TestService, protocol: tri}
`, port))),
		weft.WithService("test", &testService{slept: make(chan error, 1)}))

	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = testpb.NewTestServiceClient(cc).EmptyCall(ctx, &testpb.Empty{})
	t.Logf("grpc-go without TLS: %v", err)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "server "+addr+" takes TLS connections only") ||
		!strings.Contains(err.Error(), "TLS credentials on a gRPC client") {
		t.Fatalf("grpc-go without TLS on a TLS port: %v; want UNAVAILABLE naming the cause", err)
	}
}
