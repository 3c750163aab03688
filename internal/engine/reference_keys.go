package engine

import (
	"context"
	"strings"
	"sync"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/proxy/idl"
)

// Dubbo's reference keys generic and lazy, on the consumer URL.
const (
	KeyGeneric = "generic"
	KeyLazy    = "lazy"
)

// genericReference is a reference with generic: true (Dubbo's
// GenericService): a call that is not $invoke already is made as one, its
// arguments in generic form and its parameter types from its descriptor
// when it has one, so that the provider converts them; results come back
// in generic form.
type genericReference struct{ kernel.Invoker }

func (g genericReference) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	if inv.Method == "$invoke" || inv.Method == "$invokeAsync" || strings.HasPrefix(inv.Method, "$") {
		return g.Invoker.Invoke(ctx, inv)
	}
	args := make([]any, len(inv.Args))
	for i, a := range inv.Args {
		args[i] = view.Generic(a)
	}
	out := proxy.GenericInvocation(inv.Method, javaTypes(inv.ParamTypes), args)
	for k, v := range inv.Attachments() {
		out.SetAttachment(k, v)
	}
	out.SetAttachment(KeyGeneric, "true")
	return g.Invoker.Invoke(ctx, out)
}

// WhyUnavailable forwards to the reference (kernel.WhyUnavailable).
func (g genericReference) WhyUnavailable() error {
	if w, ok := g.Invoker.(kernel.WhyUnavailable); ok {
		return w.WhyUnavailable()
	}
	return nil
}

// javaTypes reads a JVM descriptor ("Ljava/lang/String;J") back into Java
// type names, nil when there is none or it does not parse.
func javaTypes(desc string) []string {
	if desc == "" {
		return nil
	}
	prims := map[byte]string{'Z': "boolean", 'B': "byte", 'C': "char", 'S': "short", 'I': "int", 'J': "long", 'F': "float", 'D': "double"}
	var out []string
	for i := 0; i < len(desc); {
		dims := 0
		for i < len(desc) && desc[i] == '[' {
			dims, i = dims+1, i+1
		}
		if i >= len(desc) {
			return nil
		}
		var t string
		if p, ok := prims[desc[i]]; ok {
			t, i = p, i+1
		} else if desc[i] == 'L' {
			end := strings.IndexByte(desc[i:], ';')
			if end < 0 {
				return nil
			}
			t, i = strings.ReplaceAll(desc[i+1:i+end], "/", "."), i+end+1
		} else {
			return nil
		}
		out = append(out, t+strings.Repeat("[]", dims))
	}
	if idl.Descriptor(out) != desc {
		return nil // not one this reading gives back: say no types
	}
	return out
}

// lazyInvoker is a provider referred with lazy: true (Dubbo's lazy
// connect): the protocol refers it, and connects, at its first call. Until
// then it counts as available, as Dubbo's LazyConnectExchangeClient's
// initial state does.
type lazyInvoker struct {
	url   *kernel.URL
	refer func() (kernel.Invoker, error)

	once      sync.Once
	mu        sync.Mutex
	iv        kernel.Invoker
	err       error
	destroyed bool
}

func (l *lazyInvoker) URL() *kernel.URL { return l.url }

func (l *lazyInvoker) current() (kernel.Invoker, error) {
	l.once.Do(func() {
		iv, err := l.refer()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.destroyed && iv != nil {
			iv.Destroy()
			iv, err = nil, kernel.Errorf(kernel.CodeNetwork, "invoker of %s at %s is destroyed", l.url.ServiceKey(), l.url.Address())
		}
		l.iv, l.err = iv, err
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.iv, l.err
}

func (l *lazyInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	iv, err := l.current()
	if err != nil {
		return kernel.Result{}, kernel.Wrap(kernel.CodeNetwork, err, "lazy connect to %s", l.url.Address())
	}
	return iv.Invoke(ctx, inv)
}

func (l *lazyInvoker) IsAvailable() bool {
	l.mu.Lock()
	iv, destroyed := l.iv, l.destroyed
	l.mu.Unlock()
	if destroyed {
		return false
	}
	if iv == nil {
		return true // not connected yet
	}
	return iv.IsAvailable()
}

func (l *lazyInvoker) Destroy() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.destroyed = true
	if l.iv != nil {
		l.iv.Destroy()
	}
}
