package wasmfilter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/tetratelabs/wazero/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// The bodies of a call as a proxy-wasm filter sees them (Config.Body): the
// request's arguments and the response's value, in the bytes the call's
// protocol carries them in. Triple: one gRPC frame (flag 0, length, the
// message) holding the protobuf message of an IDL call, or the values in the
// call's serialization otherwise; dubbo: the values in the call's
// serialization (hessian2 by default), as the frame's body carries the
// arguments after its header fields.
//
// A body is made only when its callback runs, and replacing it
// (proxy_set_buffer_bytes) decodes the new bytes back into the call's
// values at once: the replacement is refused, with BAD_ARGUMENT and a log
// line, when they do not decode into values of the same types as the ones
// they replace (a dubbo method's parameter types are fixed; a Triple
// message keeps its type).

// Names of Config.Body's entries (the `body` key).
const (
	BodyRequest  = "request"
	BodyResponse = "response"
)

// pwBody is the body of the callback running: its bytes, which buffer it
// is, and the values a replacement decoded to (applied when the callback
// lets the call go on).
type pwBody struct {
	typ      uint32 // pwBufRequestBody or pwBufResponseBody; data is nil otherwise
	data     []byte
	replaced []any // non-nil: the values the guest's bytes decoded to
}

// rawMessage is a protobuf message not decoded yet (Triple's request on the
// provider side, the protobuf serialization's values): its encoding.
type rawMessage interface{ Bytes() []byte }

// pwMessage is a Triple request message a filter replaced before the
// provider decoded it: decoded, like the protocol's own, as the method's
// parameter type when the service asks.
type pwMessage struct{ data []byte }

func (m *pwMessage) Bytes() []byte { return m.data }

func (m *pwMessage) DecodeAs(t reflect.Type) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer {
		if msg, ok := reflect.New(t.Elem()).Interface().(proto.Message); ok {
			if err := proto.Unmarshal(m.data, msg); err != nil {
				return reflect.Value{}, fmt.Errorf("protobuf %s (the body a wasm filter set): %w", t.Elem(), err)
			}
			return reflect.ValueOf(msg), nil
		}
	}
	return reflect.Value{}, fmt.Errorf("the method takes %s, not a protobuf message: over Triple a method takes one protobuf message", t)
}

var _ kernel.Decodable = (*pwMessage)(nil)

// SetSerializations gives the filter the App's serializations, which make
// and read the bodies of dubbo calls (the App sets it; without it, a body
// in another serialization than a Triple message cannot be made and the
// call fails, naming the cause).
func (f *Filter) SetSerializations(s extension.Serializations) { f.sers.Store(&s) }

func (f *Filter) serialization(u *kernel.URL) (extension.Serialization, error) {
	sp := f.sers.Load()
	if sp == nil {
		return nil, errors.New("the filter has no serializations (it runs outside an App)")
	}
	return (*sp).Serialization(u.ParamOr(kernel.KeySerialization, extension.DefaultSerialization))
}

// pwBodyCall runs a body callback (fn, name) over values, the request's
// arguments or the response's value, as the buffer typ, with
// end_of_stream set: the whole body at once. It returns the values the
// guest's replacement decoded to (nil: none), or the call's rejection.
func (in *instance) pwBodyCall(ctx context.Context, fn api.Function, name string, typ uint32, values []any) (replaced []any, rej, err error) {
	f, p := in.f, in.pw
	b, err := f.encodeBody(in.next.URL(), values)
	if err != nil {
		// Fail closed: a filter that asked for the body (a WAF, a
		// validator) must not be skipped.
		return nil, kernel.Wrap(kernel.CodeSerialization, err, "wasm filter %q: the body for %s could not be made", f.name, name), nil
	}
	p.body = pwBody{typ: typ, data: b}
	defer func() { p.body = pwBody{} }()
	act, err := in.pwCall(ctx, fn, name, p.ctxID, uint32(len(b)), 1)
	if err != nil {
		return nil, nil, err
	}
	if rej, err = in.await(ctx, act, name); err != nil || rej != nil {
		return nil, rej, err
	}
	return p.body.replaced, nil, nil
}

// pwSetBufferBytes is proxy_set_buffer_bytes(type, start, length, ptr,
// size): it replaces length bytes at start of a body with the guest's (the
// SDKs replace a whole body with start 0 and length its size). Only the
// body of the body callback running can be set, and only with bytes that
// decode into the call's types; otherwise BAD_ARGUMENT, logged.
func pwSetBufferBytes(h *host, in *instance, ctx context.Context, s []uint64) {
	typ, start, length := uint32(s[0]), uint64(uint32(s[1])), uint64(uint32(s[2]))
	if in == nil || in.pw == nil || in.inv == nil || in.pw.body.data == nil || in.pw.body.typ != typ {
		if in != nil {
			in.f.warn(warnBody, "weft: proxy-wasm filter set a buffer that cannot be set now (only the body of the body callback running can); it got BAD_ARGUMENT",
				"buffer", typ)
		}
		s[0] = pwBadArgument
		return
	}
	data, ok := in.read(uint32(s[3]), uint32(s[4]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	p := in.pw
	cur := p.body.data
	if start > uint64(len(cur)) {
		s[0] = pwBadArgument
		return
	}
	end := min(start+length, uint64(len(cur)))
	next := make([]byte, 0, uint64(len(cur))-(end-start)+uint64(len(data)))
	next = append(append(append(next, cur[:start]...), data...), cur[end:]...)
	old := in.inv.Args
	if typ == pwBufResponseBody {
		old = []any{in.res.Value}
	}
	u := in.next.URL()
	values, err := in.f.decodeBody(u, next, old)
	if err != nil {
		in.f.warn(warnBody, "weft: proxy-wasm filter's new body does not decode into the call's values; the body is unchanged and the filter got BAD_ARGUMENT",
			"protocol", u.Protocol, "side", u.Param(kernel.KeySide), "body", map[uint32]string{pwBufRequestBody: BodyRequest, pwBufResponseBody: BodyResponse}[typ],
			"error", err.Error())
		s[0] = pwBadArgument
		return
	}
	p.body.data, p.body.replaced = next, values
	s[0] = pwOK
}

// wireFormat checks that b is a sequence of protobuf fields (the top
// level of a message; what the fields hold is checked when it is decoded).
func wireFormat(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("not a protobuf message: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("not a protobuf message: field %d: %w", num, protowire.ParseError(m))
		}
		b = b[n+m:]
	}
	return nil
}

// grpcFrame is msg in one uncompressed gRPC frame.
func grpcFrame(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// grpcUnframe is the message of one uncompressed gRPC frame.
func grpcUnframe(b []byte) ([]byte, error) {
	if len(b) < 5 || b[0] != 0 || uint64(binary.BigEndian.Uint32(b[1:])) != uint64(len(b)-5) {
		return nil, errors.New("not one uncompressed gRPC frame (flag 0, a 4-byte length, then exactly that many bytes)")
	}
	return b[5:], nil
}

// protoOne is the protobuf message of an IDL call's values: one message
// (decoded or not).
func protoOne(u *kernel.URL, values []any) (any, bool) {
	if u.Protocol != "tri" || len(values) != 1 {
		return nil, false
	}
	switch values[0].(type) {
	case rawMessage, proto.Message:
		return values[0], true
	}
	return nil, false
}

// encodeBody is values as the call's protocol carries them.
func (f *Filter) encodeBody(u *kernel.URL, values []any) ([]byte, error) {
	if m, ok := protoOne(u, values); ok {
		if raw, ok := m.(rawMessage); ok {
			return grpcFrame(raw.Bytes()), nil
		}
		b, err := proto.Marshal(m.(proto.Message))
		if err != nil {
			return nil, err
		}
		return grpcFrame(b), nil
	}
	ser, err := f.serialization(u)
	if err != nil {
		return nil, err
	}
	b, err := ser.Marshal(nil, values...)
	if err != nil {
		return nil, err
	}
	if u.Protocol == "tri" {
		return grpcFrame(b), nil
	}
	return b, nil
}

// decodeBody reads b, a body the guest set, back into values of the types
// of old, the values it replaces.
func (f *Filter) decodeBody(u *kernel.URL, b []byte, old []any) ([]any, error) {
	if m, ok := protoOne(u, old); ok {
		data, err := grpcUnframe(b)
		if err != nil {
			return nil, err
		}
		data = append([]byte(nil), data...)
		if _, ok := m.(proto.Message); !ok {
			// The message's type is the method's, which only the service
			// knows: the bytes must at least be protobuf's wire format.
			if err := wireFormat(data); err != nil {
				return nil, err
			}
			return []any{&pwMessage{data}}, nil
		}
		msg := m.(proto.Message).ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data, msg); err != nil {
			return nil, fmt.Errorf("not a %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
		}
		return []any{msg}, nil
	}
	if u.Protocol == "tri" {
		var err error
		if b, err = grpcUnframe(b); err != nil {
			return nil, err
		}
	}
	ser, err := f.serialization(u)
	if err != nil {
		return nil, err
	}
	// The decoder may keep referring to its input: it gets a copy.
	dec := ser.NewDecoder(append([]byte(nil), b...))
	out := make([]any, len(old))
	for i := range old {
		v, err := dec.Decode()
		if err != nil {
			return nil, fmt.Errorf("value %d of %d: %w", i+1, len(old), err)
		}
		if want, got := reflect.TypeOf(old[i]), reflect.TypeOf(v); want != got {
			return nil, fmt.Errorf("value %d decodes as %v, but the call's is %v (a method's types do not change)", i+1, got, want)
		}
		out[i] = v
	}
	if _, err := dec.Decode(); err == nil {
		return nil, fmt.Errorf("more than the call's %d values", len(old))
	}
	return out, nil
}
