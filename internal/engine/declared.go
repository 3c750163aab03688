package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/proxy/idl"
)

// innerInvoker is a service's innermost invoker, where its provider chain
// ends: a Go implementation's (proxy.ServiceInvoker), or one from config
// (a declared interface served by a forward, or a forward of whatever
// comes).
type innerInvoker interface {
	kernel.Invoker
	MethodNames() []string
	StreamKinds() map[string]kernel.StreamKind
	// withURL is the same implementation under another URL (one per
	// exported protocol).
	withURL(u *kernel.URL) innerInvoker
	// protoFile is the protobuf IDL of a service declared by one.
	protoFile() protoreflect.FileDescriptor
}

type goInvoker struct{ *proxy.ServiceInvoker }

func (g goInvoker) withURL(u *kernel.URL) innerInvoker     { return goInvoker{g.ServiceInvoker.WithURL(u)} }
func (g goInvoker) protoFile() protoreflect.FileDescriptor { return nil }

type idlInvoker struct{ *idl.Invoker }

func (d idlInvoker) withURL(u *kernel.URL) innerInvoker     { return idlInvoker{d.Invoker.WithURL(u)} }
func (d idlInvoker) protoFile() protoreflect.FileDescriptor { return d.ProtoFile() }

// described is an exported chain that carries its service's protobuf
// IDL, which the Triple server's gRPC reflection describes
// (triple.Described).
type described struct {
	kernel.Invoker
	fd protoreflect.FileDescriptor
}

func (d described) ProtoFile() protoreflect.FileDescriptor { return d.fd }

// WhyUnavailable forwards to the chain (kernel.WhyUnavailable).
func (d described) WhyUnavailable() error {
	if w, ok := d.Invoker.(kernel.WhyUnavailable); ok {
		return w.WhyUnavailable()
	}
	return nil
}

// forwarder passes every call of a service with no declared interface to
// a reference as it came: its method, its arguments as the protocol read
// them (hessian2 values with their Java descriptor, Triple's message
// bytes), its attachments but those of the hop.
type forwarder struct {
	url    *kernel.URL
	target func() (kernel.Invoker, error)
}

func passThrough(u *kernel.URL, h forward) innerInvoker { return forwarder{u, h.target} }

func (f forwarder) URL() *kernel.URL                          { return f.url }
func (f forwarder) IsAvailable() bool                         { return true }
func (f forwarder) Destroy()                                  {}
func (f forwarder) MethodNames() []string                     { return nil }
func (f forwarder) StreamKinds() map[string]kernel.StreamKind { return nil }
func (f forwarder) withURL(u *kernel.URL) innerInvoker        { return forwarder{u, f.target} }
func (f forwarder) protoFile() protoreflect.FileDescriptor    { return nil }

func (f forwarder) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	iv, err := f.target()
	if err != nil {
		return kernel.Result{}, err
	}
	out := &kernel.Invocation{Method: inv.Method, ParamTypes: inv.ParamTypes, Args: inv.Args}
	idl.CopyAttachments(out, inv)
	return iv.Invoke(ctx, out)
}

// forward is a service's impl.forward: the reference its calls go to.
type forward struct {
	idl.Handler
	target func() (kernel.Invoker, error)
}

// handler makes what implements a service from config.
func (rt *Runtime) handler(im *config.Impl) (forward, error) {
	if im.Forward == "" {
		return forward{}, errors.New("impl: give forward: <reference id> (a reference of consumer.references that each call is passed to)")
	}
	rc, ok := rt.cfg.Consumer.References[im.Forward]
	if !ok {
		return forward{}, fmt.Errorf("impl.forward: no reference %q in consumer.references (references: %s)",
			im.Forward, strings.Join(sortedKeys(rt.cfg.Consumer.References), ", "))
	}
	id := im.Forward
	target := func() (kernel.Invoker, error) {
		r, ok := rt.refs[id]
		if !ok {
			return nil, kernel.Errorf(kernel.CodeNoProvider, "reference %q is not referred", id)
		}
		return r.current()
	}
	msgs := rc.Protocol == "tri" || strings.HasPrefix(rc.URL, "tri://")
	return forward{idl.Forward(target, idl.ForwardOptions{Messages: msgs}), target}, nil
}

// declare reads a service's declared interface: its IDL, or its methods'
// Java types. nil (and no error) for a forward of an interface that is not
// declared: its calls pass as they come.
func (rt *Runtime) declare(sc config.Service) (*idl.Interface, error) {
	table := map[string]idl.MethodTypes{}
	for name, m := range sc.Methods {
		if len(m.Params) > 0 || m.Returns != "" {
			table[name] = idl.MethodTypes{Params: m.Params, Returns: m.Returns}
		}
	}
	if sc.IDL != "" {
		it, err := idl.LoadProto(sc.IDL, sc.Service, nil, table)
		if err != nil {
			return nil, fmt.Errorf("idl: %w", err)
		}
		return it, nil
	}
	if sc.Service != "" {
		return nil, errors.New("service names a service of an IDL: give idl: <file.proto> too")
	}
	if len(table) == 0 {
		return nil, nil
	}
	if sc.Interface == "" {
		return nil, errors.New("interface is required with methods.<name>.params, e.g. interface: org.example.Greeter")
	}
	it, err := idl.FromTable(sc.Interface, table)
	if err != nil {
		return nil, fmt.Errorf("methods: %w", err)
	}
	return it, nil
}
