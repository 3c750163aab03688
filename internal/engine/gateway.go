package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/proxy/idl"
)

// A gateway is a service of interface "*" whose impl forwards to a
// reference of interface "*": the protocol servers hand it every call of a
// service they do not export themselves, and it forwards the call, as it
// came, to that service through a reference made on the first call from
// the template's settings (registries, cluster, load balancer, filters)
// with the called service's name, group and version. Only the services on
// its allow-list are forwarded, and at most MaxGatewayServices of them:
// callers name services, and each one costs a registry subscription.

// MaxGatewayServices bounds the services one gateway refers.
const MaxGatewayServices = 256

type gateway struct {
	rt    *Runtime
	url   *kernel.URL
	id    string // the service's id
	tmpl  string // the template reference's id
	allow []string

	mu   sync.Mutex
	refs map[string]*gatewayRef // by service key
}

type gatewayRef struct {
	ready chan struct{} // closed when referred (or failed)
	r     *reference
	err   error
}

func (rt *Runtime) newGateway(id string, sc config.Service, u *kernel.URL) (*gateway, error) {
	im := sc.Impl
	if im == nil || im.Forward == "" {
		return nil, errors.New(`interface "*" is a gateway: give impl: {forward: <reference of interface "*">, allow: [org.example.*]}`)
	}
	if sc.IDL != "" || sc.Service != "" {
		return nil, errors.New(`a gateway (interface "*") forwards calls as they come: it takes no idl`)
	}
	rc, ok := rt.cfg.Consumer.References[im.Forward]
	if !ok {
		return nil, atKey("impl.forward", fmt.Errorf("no reference %q in consumer.references (references: %s)",
			im.Forward, strings.Join(sortedKeys(rt.cfg.Consumer.References), ", ")))
	}
	if rc.Interface != "*" {
		return nil, atKey("impl.forward", fmt.Errorf(`a gateway forwards to a reference of interface "*", the template of the references it makes; %q is %s`, im.Forward, rc.Interface))
	}
	if rc.URL == "" && len(rt.registryURLs) == 0 {
		return nil, atKey("impl.forward", fmt.Errorf(`the gateway's reference %q finds services through a registry: configure one (registries.<id>.address)`, im.Forward))
	}
	if len(im.Allow) == 0 {
		return nil, atKey("impl.allow", errors.New(`a gateway forwards only the services on its allow-list: give allow: [org.example.Greeter, "org.example.*"]`))
	}
	for i, a := range im.Allow {
		name, _, _ := strings.Cut(a, ":")
		if _, err := path.Match(name, ""); err != nil || name == "" {
			return nil, atKey(fmt.Sprintf("impl.allow[%d]", i), fmt.Errorf("%q is not a service name or glob", a))
		}
	}
	return &gateway{rt: rt, url: u, id: id, tmpl: im.Forward, allow: im.Allow, refs: map[string]*gatewayRef{}}, nil
}

// gatewayTemplate reports whether a service of interface "*" forwards to
// the reference id.
func (rt *Runtime) gatewayTemplate(id string) bool {
	for _, sc := range rt.cfg.Provider.Services {
		if sc.Interface == "*" && sc.Impl != nil && sc.Impl.Forward == id {
			return true
		}
	}
	return false
}

func (g *gateway) allowed(svc, version string) bool {
	for _, a := range g.allow {
		name, v, hasV := strings.Cut(a, ":")
		if ok, _ := path.Match(name, svc); ok && (!hasV || v == version) {
			return true
		}
	}
	return false
}

// Invoke forwards the call to the service it names.
func (g *gateway) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	svc := inv.AttachmentString(kernel.KeyInterface)
	if svc == "" {
		svc = inv.AttachmentString(kernel.KeyPath)
	}
	group, version := inv.AttachmentString(kernel.KeyGroup), inv.AttachmentString(kernel.KeyVersion)
	if !g.allowed(svc, version) {
		return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "gateway %s does not forward %s: it is not on its allow-list (%s)",
			g.id, view.Cut(kernel.ServiceKey(svc, group, version), 200), strings.Join(g.allow, ", "))
	}
	iv, err := g.reference(ctx, svc, group, version)
	if err != nil {
		return kernel.Result{}, err
	}
	out, err := idl.Pass(inv)
	if err != nil {
		return kernel.Result{}, err
	}
	return iv.Invoke(ctx, out)
}

// reference is the invoker of the service's reference, made and referred
// on its first call; that call waits (within its deadline) for a provider
// to be listed.
func (g *gateway) reference(ctx context.Context, svc, group, version string) (kernel.Invoker, error) {
	key := kernel.ServiceKey(svc, group, version)
	g.mu.Lock()
	gr, ok := g.refs[key]
	if !ok {
		if len(g.refs) >= MaxGatewayServices {
			g.mu.Unlock()
			return nil, kernel.Errorf(kernel.CodeLimitExceeded, "gateway %s forwards %d services already, its most (MaxGatewayServices): narrow its allow-list", g.id, MaxGatewayServices)
		}
		gr = &gatewayRef{ready: make(chan struct{})}
		g.refs[key] = gr
		g.mu.Unlock()
		gr.r, gr.err = g.refer(svc, group, version)
		close(gr.ready)
		if gr.err != nil {
			g.mu.Lock()
			delete(g.refs, key) // the next call tries again
			g.mu.Unlock()
			return nil, gr.err
		}
	} else {
		g.mu.Unlock()
		select {
		case <-gr.ready:
		case <-ctx.Done():
			return nil, kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "gateway %s: waiting for the reference of %s", g.id, view.Cut(key, 200))
		}
		if gr.err != nil {
			return nil, gr.err
		}
	}
	iv, err := gr.r.current()
	if err != nil {
		return nil, err
	}
	if !iv.IsAvailable() {
		wait := CheckWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		waitAvailable(ctx, iv, wait)
	}
	return iv, nil
}

func (g *gateway) refer(svc, group, version string) (*reference, error) {
	rt := g.rt
	rc := rt.cfg.Consumer.References[g.tmpl]
	rc.Interface, rc.Group, rc.Version = svc, group, version
	no := false
	rc.Check = &no
	r, err := rt.buildReference(rt.cfg, g.tmpl+"/"+kernel.ServiceKey(svc, group, version), rc)
	if err != nil {
		return nil, kernel.Wrap(kernel.CodeNoProvider, err, "gateway %s: refer %s", g.id, svc)
	}
	rt.applyMu.Lock()
	stopped := rt.stopped
	rt.applyMu.Unlock()
	if stopped {
		return nil, kernel.Errorf(kernel.CodeShuttingDown, "gateway %s: the App is stopping", g.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.refer(ctx, r); err != nil {
		return nil, kernel.Wrap(kernel.CodeNoProvider, err, "gateway %s: refer %s", g.id, svc)
	}
	return r, nil
}

// close releases the references the gateway made.
func (g *gateway) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, gr := range g.refs {
		select {
		case <-gr.ready:
		default:
			continue // being referred: refer's own failure path cleans up
		}
		if gr.r != nil {
			if p := gr.r.invoker.Swap(nil); p != nil {
				(*p).Destroy()
			}
			if gr.r.gov != nil {
				gr.r.gov.Close()
			}
		}
		delete(g.refs, k)
	}
}

func (g *gateway) URL() *kernel.URL                          { return g.url }
func (g *gateway) IsAvailable() bool                         { return true }
func (g *gateway) Destroy()                                  {}
func (g *gateway) MethodNames() []string                     { return nil }
func (g *gateway) StreamKinds() map[string]kernel.StreamKind { return nil }
func (g *gateway) protoFile() protoreflect.FileDescriptor    { return nil }

// withURL shares the gateway's references across its protocols.
func (g *gateway) withURL(u *kernel.URL) innerInvoker {
	return &gatewayView{g, u}
}

type gatewayView struct {
	*gateway
	u *kernel.URL
}

func (v *gatewayView) URL() *kernel.URL                   { return v.u }
func (v *gatewayView) withURL(u *kernel.URL) innerInvoker { return &gatewayView{v.gateway, u} }
