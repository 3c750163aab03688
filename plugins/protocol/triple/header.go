package triple

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// attrHeader is the invocation attribute holding a call's response
// headers (SetHeader).
const attrHeader = "triple.header"

// SetHeader sets a response header of the call ctx belongs to (a provider's
// method's context): gRPC's initial metadata, sent with the first answer.
// Reply attachments (kernel.SetReplyAttachment) go in the trailers, as
// Dubbo 3 sends them; a gRPC client reads these with grpc.Header. It must
// be called before the first answer is sent; it reports whether ctx is a
// call's.
func SetHeader(ctx context.Context, k string, v any) bool {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return false
	}
	m, _ := inv.Attribute(attrHeader)
	hm, _ := m.(map[string]any)
	if hm == nil {
		hm = map[string]any{}
		inv.SetAttribute(attrHeader, hm)
	}
	hm[k] = v
	return true
}

// headersOf are the response headers a method set.
func headersOf(inv *kernel.Invocation) map[string]any {
	if inv == nil {
		return nil
	}
	m, _ := inv.Attribute(attrHeader)
	hm, _ := m.(map[string]any)
	return hm
}
