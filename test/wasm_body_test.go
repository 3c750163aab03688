package test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// pbEcho is a Triple IDL service: one protobuf message in, one out.
type pbEcho struct{}

func (pbEcho) Echo(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String(in.Value), nil
}

type pbEchoClient struct {
	Echo func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

// A proxy-wasm filter with `body: [request, response]` (a Go filter on
// proxy-wasm-go-sdk, testdata/proxywasm-go/body) reads a call's bodies and
// replaces them, on each side of a dubbo call, a Triple call in Dubbo's
// wrapper mode, and a Triple IDL call: the request body is the arguments in
// the call's serialization (hessian2), in one gRPC frame over Triple, or
// the protobuf message in one gRPC frame for an IDL call; a replacement
// that decodes into the call's types becomes the provider's argument or the
// consumer's result, and one that does not is refused (BAD_ARGUMENT to the
// filter) with the call unchanged.
func TestProxyWasmBodies(t *testing.T) {
	mod := buildProxyWasmGo(t, filepath.Join(t.TempDir(), "pw"), "body")
	h2 := func(v any) []byte {
		b, err := hessian2.New().Marshal(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pb := func(s string) []byte {
		b, err := proto.Marshal(wrapperspb.String(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	frame := func(b []byte) []byte {
		return append([]byte{0, byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
	}
	cases := []struct {
		name, proto string
		idl         bool
		body        func(s string) []byte // the body of a call with argument (or result) s
		bad         []byte                // a body of another type
	}{
		{"dubbo", "dubbo", false, func(s string) []byte { return h2(s) }, h2(int64(7))},
		{"tri", "tri", false, func(s string) []byte { return frame(h2(s)) }, frame(h2(int64(7)))},
		{"tri-idl", "tri", true, func(s string) []byte { return frame(pb(s)) }, frame([]byte{0xff, 0xff})},
	}
	for _, tc := range cases {
		for _, side := range []string{kernel.GroupProvider, kernel.GroupConsumer} {
			t.Run(tc.name+"/"+side, func(t *testing.T) {
				filter := fmt.Sprintf("wasm: {filters: {pw-body: {abi: proxy-wasm, path: %q, body: [request, response], groups: [%s]}}}\n", mod, side)
				pFilter, cFilter := "", ""
				if side == kernel.GroupProvider {
					pFilter = filter
				} else {
					cFilter = filter
				}
				addr := freePort(t)
				iface, svc, method := "org.weft.Tracer", any(tracer{}), "echo"
				arg := func(s string) any { return s }
				value := func(v any) string { s, _ := v.(string); return s }
				if tc.idl {
					iface, svc, method = "org.weft.PbEcho", pbEcho{}, "Echo"
					arg = func(s string) any { return wrapperspb.String(s) }
					value = func(v any) string {
						// A consumer's raw invoker answers the message undecoded.
						if d, ok := v.(kernel.Decodable); ok {
							rv, err := d.DecodeAs(reflect.TypeOf(&wrapperspb.StringValue{}))
							if err != nil {
								t.Fatal(err)
							}
							v = rv.Interface()
						}
						m, _ := v.(*wrapperspb.StringValue)
						return m.GetValue()
					}
				}
				logs := &syncBuffer{}
				logger := weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))
				startApp(t, fmt.Sprintf("%sprotocols: {%s: {port: %s}}\nprovider: {services: {svc: {interface: %s, protocol: %s}}}\n",
					pFilter, tc.proto, addr[strings.LastIndexByte(addr, ':')+1:], iface, tc.proto), weft.WithService("svc", svc), logger)
				var c tracerClient
				var pc pbEchoClient
				ref := any(&c)
				if tc.idl {
					ref = &pc
				}
				app := startApp(t, fmt.Sprintf("%sconsumer: {references: {svc: {interface: %s, url: \"%s://%s\", retries: 0}}}\n",
					cFilter, iface, tc.proto, addr), weft.WithReference("svc", ref), logger)
				iv, err := app.Reference("svc")
				if err != nil {
					t.Fatal(err)
				}
				call := func(att map[string]string) (string, map[string]any) {
					t.Helper()
					inv := kernel.NewInvocation(method, arg("hello"))
					for k, v := range att {
						inv.SetAttachment(k, v)
					}
					res, err := iv.Invoke(context.Background(), inv)
					if err != nil {
						t.Fatalf("call with %v: %v", att, err)
					}
					return value(res.Value), res.Attachments
				}

				got, att := call(nil)
				if want := hex.EncodeToString(tc.body("hello")); got != "hello" || att["x-req-body"] != want {
					t.Fatalf("plain call: result %q, the filter saw the request body %v; want hello and %s", got, att["x-req-body"], want)
				}
				got, att = call(map[string]string{"x-new-body": hex.EncodeToString(tc.body("HELLO"))})
				if got != "HELLO" || att["x-set-body"] != "ok" {
					t.Fatalf("request body replaced: result %q (set: %v); want the provider to get HELLO", got, att["x-set-body"])
				}
				got, att = call(map[string]string{"x-new-body": hex.EncodeToString(tc.bad)})
				if got != "hello" || att["x-set-body"] == "ok" || att["x-set-body"] == nil {
					t.Fatalf("a request body of another type: result %q (set: %v); want it refused and the call unchanged", got, att["x-set-body"])
				}
				if l := logs.String(); !strings.Contains(l, "new body does not decode into the call's values") || !strings.Contains(l, "protocol="+tc.proto) || !strings.Contains(l, "body=request") {
					t.Errorf("the refused body left no log line naming the protocol and the body; the log:\n%s", l)
				}
				got, _ = call(map[string]string{"x-new-resp-body": hex.EncodeToString(tc.body("bye"))})
				if got != "bye" {
					t.Fatalf("response body replaced: result %q, want bye", got)
				}
			})
		}
	}
}
