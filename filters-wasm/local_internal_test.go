package wasmfilter

import (
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// A local response's code: its gRPC status when it gives one (not -1),
// else its HTTP status as Envoy's gRPC bridge maps it, as docs/wasm.md
// lists.
func TestLocalReplyCode(t *testing.T) {
	for _, c := range []struct {
		http, grpc int32
		want       kernel.Code
	}{
		{403, 7, kernel.CodeOfGRPCStatus(7)},
		{200, 5, kernel.CodeOfGRPCStatus(5)},
		{401, -1, kernel.CodeForbidden},
		{403, -1, kernel.CodeForbidden},
		{404, -1, kernel.CodeMethodNotFound},
		{408, -1, kernel.CodeTimeout},
		{504, -1, kernel.CodeTimeout},
		{429, -1, kernel.CodeLimitExceeded},
		{502, -1, kernel.CodeNetwork},
		{503, -1, kernel.CodeNetwork},
		{418, -1, kernel.CodeForbidden},
		{500, -1, kernel.CodeUnknown},
		{200, -1, kernel.CodeUnknown},
		{403, 99, kernel.CodeForbidden}, // not a gRPC status: the HTTP one decides
	} {
		if got := (&localReply{httpStatus: c.http, grpcStatus: c.grpc}).code(); got != c.want {
			t.Errorf("HTTP %d, grpc-status %d: code %v, want %v", c.http, c.grpc, got, c.want)
		}
	}
}
