package idl

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Handler implements a declared interface: a forward to a reference, a
// WASM module. It may be called concurrently.
type Handler interface {
	Handle(ctx context.Context, c *Call) (kernel.Result, error)
}

// HandlerFunc is a Handler of one function.
type HandlerFunc func(ctx context.Context, c *Call) (kernel.Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *Call) (kernel.Result, error) { return f(ctx, c) }

// Call is one call of a declared method, its arguments in the declared
// types.
type Call struct {
	Interface *Interface
	Method    *Method
	// Args: a proto method's request (one *dynamicpb.Message); a table
	// method's arguments, in its Java types where Go has one
	// (javaValue), in generic form otherwise.
	Args []any
	// Inv is the invocation as the protocol read it: attachments, the
	// remote address.
	Inv *kernel.Invocation
}

// A Handler's result Value may be a protobuf message, bytes in its wire
// form (kernel.Encoded: a forward's answer), or a value in generic form;
// the Invoker puts it in the method's declared type and in the form the
// caller's protocol writes.

// Invoker serves a declared interface through a Handler: the innermost
// invoker of a provider's chain, as proxy.ServiceInvoker is for a Go
// implementation.
type Invoker struct {
	url *kernel.URL
	it  *Interface
	h   Handler
}

// NewInvoker serves it at url with h.
func NewInvoker(url *kernel.URL, it *Interface, h Handler) *Invoker {
	return &Invoker{url: url, it: it, h: h}
}

// URL describes the service.
func (iv *Invoker) URL() *kernel.URL { return iv.url }

// WithURL returns an invoker of the same interface and handler under
// another URL (one per exported protocol).
func (iv *Invoker) WithURL(u *kernel.URL) *Invoker {
	c := *iv
	c.url = u
	return &c
}

// Interface is the declared interface.
func (iv *Invoker) Interface() *Interface { return iv.it }

// Handler is the implementation.
func (iv *Invoker) Handler() Handler { return iv.h }

// IsAvailable is always true.
func (iv *Invoker) IsAvailable() bool { return true }

// Destroy does nothing: the handler is the App's.
func (iv *Invoker) Destroy() {}

// MethodNames lists the declared methods.
func (iv *Invoker) MethodNames() []string { return iv.it.MethodNames() }

// StreamKinds are the streaming methods' kinds.
func (iv *Invoker) StreamKinds() map[string]kernel.StreamKind { return iv.it.StreamKinds() }

// ProtoFile is the IDL file of a proto-declared service (gRPC reflection
// describes it); nil for a method table.
func (iv *Invoker) ProtoFile() protoreflect.FileDescriptor { return iv.it.File() }

// Invoke puts the call's arguments in the declared types, calls the
// handler and puts its result in the declared type, in the form of the
// caller: a protobuf message for a caller that sent one (Triple, gRPC,
// JSON over HTTP), a value in generic form for hessian2 callers.
func (iv *Invoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	m, ok := iv.it.Method(inv.Method)
	if !ok {
		return kernel.Result{}, kernel.Errorf(kernel.CodeMethodNotFound, "service %s has no method %q (methods: %s)",
			iv.url.ServiceKey(), view.Cut(inv.Method, 200), strings.Join(iv.it.names, ", "))
	}
	if m.Stream != kernel.Unary {
		return kernel.Result{}, kernel.Errorf(kernel.CodeMethodNotFound, "%s.%s is a %s-streaming method: a service declared in config serves unary methods only",
			iv.url.ServiceKey(), m.Name, m.Stream)
	}
	args, messages, err := iv.args(m, inv.Args)
	if err != nil {
		return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s.%s: arguments", iv.url.ServiceKey(), m.Name)
	}
	res, err := iv.h.Handle(ctx, &Call{Interface: iv.it, Method: m, Args: args, Inv: inv})
	if err != nil {
		return res, err
	}
	if res.Value, err = result(m, res.Value, messages); err != nil {
		return kernel.Result{Attachments: res.Attachments}, kernel.Wrap(kernel.CodeSerialization, err, "%s.%s: result", iv.url.ServiceKey(), m.Name)
	}
	return res, nil
}

// args puts a call's arguments in m's types and says whether the caller
// speaks in protobuf messages (or their JSON).
func (iv *Invoker) args(m *Method, in []any) ([]any, bool, error) {
	messages := false
	for _, a := range in {
		if e, ok := a.(kernel.Encoded); ok {
			messages = messages || e.Encoding() == "proto" || (m.Proto() && e.Encoding() == "json")
		} else if _, ok := a.(proto.Message); ok {
			messages = true
		}
	}
	if m.Proto() {
		switch {
		case len(in) == 1:
			msg, err := toMessage(in[0], m.In)
			return []any{msg}, messages, err
		case len(in) == 0:
			return []any{dynamicpb.NewMessage(m.In)}, messages, nil
		case len(in) == m.In.Fields().Len():
			// A hessian2 caller passing the request's fields as the
			// Java method's parameters, in order.
			obj := map[string]any{}
			fs := m.In.Fields()
			for i, a := range in {
				obj[fs.Get(i).JSONName()] = a
			}
			msg, err := toMessage(obj, m.In)
			return []any{msg}, messages, err
		}
		return nil, false, fmt.Errorf("%d arguments for a method that takes one %s", len(in), m.In.FullName())
	}
	if len(in) != len(m.Params) {
		return nil, false, fmt.Errorf("%d arguments for a method that takes %d (%s)", len(in), len(m.Params), strings.Join(m.Params, ", "))
	}
	out := make([]any, len(in))
	for i, a := range in {
		v, err := javaValue(a, m.Params[i])
		if err != nil {
			return nil, false, fmt.Errorf("argument %d: %w", i, err)
		}
		out[i] = v
	}
	return out, messages, nil
}

// result puts a handler's result in m's type and the caller's form.
func result(m *Method, v any, messages bool) (any, error) {
	if m.Proto() {
		if v != nil && !isMessageLike(v) {
			// A scalar answer (a hessian2 method's String) goes into
			// the response's one field.
			if m.Out.Fields().Len() != 1 {
				return nil, fmt.Errorf("a %s where %s (of %d fields) is declared", kindOf(view.Generic(v)), m.Out.FullName(), m.Out.Fields().Len())
			}
			v = map[string]any{m.Out.Fields().Get(0).JSONName(): v}
		}
		msg, err := toMessage(v, m.Out)
		if err != nil {
			return nil, err
		}
		if messages {
			return msg, nil
		}
		return messageValue(msg, "", 0), nil
	}
	if m.Returns == "" || m.Returns == "void" {
		return nil, nil
	}
	if e, ok := v.(kernel.Encoded); ok {
		if e.Encoding() != "json" {
			return nil, fmt.Errorf("a %s message where %s is declared", e.Encoding(), m.Returns)
		}
		return javaValue(e, m.Returns)
	}
	if pm, ok := v.(proto.Message); ok {
		v = messageValue(pm.ProtoReflect(), "", 0)
	}
	if !scalarValue(v) {
		v = view.Generic(v)
	}
	return javaValue(v, m.Returns)
}

// isMessageLike: what toMessage reads as a message, not a scalar to put in
// a field.
func isMessageLike(v any) bool {
	switch v.(type) {
	case kernel.Encoded, proto.Message, map[string]any, map[any]any:
		return true
	}
	rv := reflect.ValueOf(v)
	k := rv.Kind()
	if k == reflect.Pointer {
		k = rv.Elem().Kind()
	}
	return k == reflect.Struct || k == reflect.Map
}

func scalarValue(v any) bool {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid, reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	_, b := v.([]byte)
	return b
}

// guestLimits bound the JSON of a call's arguments handed to a guest: as
// the WASM filters' view, strings whole, the total well below an
// instance's memory.
var guestLimits = view.Limits{MaxDepth: 64, MaxNodes: 1 << 20, MaxString: 0, MaxBytes: 8 << 20}

// ArgsJSON is the call's arguments as a JSON array in their declared
// types: a proto method's request in protobuf's JSON form, a table
// method's arguments as JSON (bounded as any view of a decoded value).
func (c *Call) ArgsJSON() ([]byte, error) {
	if c.Method.Proto() {
		b, err := protojson.Marshal(c.Args[0].(proto.Message))
		if err != nil {
			return nil, err
		}
		return append(append([]byte{'['}, b...), ']'), nil
	}
	return json.Marshal(view.JSONWith(c.Args, guestLimits))
}
