package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftrpc/weft/config"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
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
	out, err := idl.Pass(inv)
	if err != nil {
		return kernel.Result{}, err
	}
	return iv.Invoke(ctx, out)
}

// forward is what implements a service from config: a handler of its
// declared interface, and for a forward its target (the reference), for a
// WASM service its module.
type forward struct {
	idl.Handler
	target func() (kernel.Invoker, error)
	wasm   *wasmfilter.Filter
}

// handler makes what implements a service from config.
func (rt *Runtime) handler(id string, im *config.Impl, declared *idl.Interface) (forward, error) {
	switch {
	case im.Forward != "" && im.Wasm != "":
		return forward{}, atKey("impl", errors.New("give forward or wasm, not both"))
	case im.Wasm != "":
		return rt.wasmHandler(id, im, declared)
	case im.Forward == "":
		return forward{}, atKey("impl", errors.New("give forward: <reference id> (a reference of consumer.references that each call is passed to), or wasm: <module.wasm>"))
	}
	rc, ok := rt.cfg.Consumer.References[im.Forward]
	if !ok {
		return forward{}, atKey("impl.forward", fmt.Errorf("no reference %q in consumer.references (references: %s)",
			im.Forward, strings.Join(sortedKeys(rt.cfg.Consumer.References), ", ")))
	}
	// The target may change while the App runs (a config center's
	// impl.forward): each call reads it once.
	ref := new(atomic.Pointer[string])
	ref.Store(&im.Forward)
	rt.forwards[id] = ref
	target := func() (kernel.Invoker, error) {
		id := *ref.Load()
		r, ok := rt.refs[id]
		if !ok {
			return nil, kernel.Errorf(kernel.CodeNoProvider, "reference %q is not referred", id)
		}
		return r.current()
	}
	msgs := rc.Protocol == "tri" || strings.HasPrefix(rc.URL, "tri://")
	return forward{Handler: idl.Forward(target, idl.ForwardOptions{Messages: msgs}), target: target}, nil
}

// wasmHandler compiles a service's module (its first instance started, so
// that a module that cannot serve fails New) and serves the declared
// interface with it: the guest gets the arguments in their declared types
// as JSON, and answers in JSON that the interface puts in its result type.
func (rt *Runtime) wasmHandler(id string, im *config.Impl, declared *idl.Interface) (forward, error) {
	if declared == nil {
		return forward{}, atKey("impl.wasm", errors.New("a WASM service declares its interface: idl: <file.proto>, or methods.<name>.params and returns with Java types"))
	}
	for k, c := range im.Clusters {
		if r, ok := strings.CutPrefix(c, "ref:"); ok {
			if _, known := rt.cfg.Consumer.References[r]; !known {
				return forward{}, atKey("impl.clusters."+k, fmt.Errorf("no reference %q in consumer.references (references: %s)",
					r, strings.Join(sortedKeys(rt.cfg.Consumer.References), ", ")))
			}
		}
	}
	f, err := wasmfilter.New(context.Background(), wasmfilter.Config{
		Name: id, Service: true, Path: im.Wasm, SHA256: im.SHA256, Settings: im.Config,
		MaxInstances: im.MaxInstances, MaxMemoryPages: uint32(max(im.MaxMemoryPages, 0)),
		Timeout: time.Duration(im.Timeout) * time.Millisecond, Clusters: im.Clusters, MaxCallouts: im.MaxCallouts,
		Log: rt.log.With("service", id),
	})
	if err != nil {
		return forward{}, atKey("impl.wasm", err)
	}
	f.SetReferences(rt.Reference)
	rt.wasmServices = append(rt.wasmServices, f)
	h := idl.HandlerFunc(func(ctx context.Context, c *idl.Call) (kernel.Result, error) {
		// The JSON is made only if the guest asks for it: one that reads
		// a string argument with get_argument_string never does.
		return f.Serve(ctx, c.Inv, c.ArgsJSON, c.Args)
	})
	return forward{Handler: h, wasm: f}, nil
}

// keyError is a config error of one key below the service's path
// ("impl.wasm"), so that it is reported at its full key path.
type keyError struct {
	key string
	err error
}

func (e *keyError) Error() string { return e.key + ": " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

func atKey(key string, err error) error { return &keyError{key, err} }

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
			return nil, atKey("idl", err)
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
		return nil, err
	}
	return it, nil
}
