// Package injvm is Dubbo's in-process protocol: a consumer calls a provider of
// the same App directly, through both filter chains, with no network and no
// serialization. Dubbo uses it when a service is both exported and referred
// in one JVM; weft's quick start runs on it.
package injvm

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the protocol's extension name.
const Name = "injvm"

// Protocol keeps the exporters of one App by service key
// (group/interface:version).
type Protocol struct {
	mu        sync.RWMutex
	exporters map[string]*exporter
}

// New returns an empty protocol.
func New() *Protocol { return &Protocol{exporters: map[string]*exporter{}} }

var _ extension.Protocol = (*Protocol)(nil)

// Export makes invoker callable in process under its service key.
func (p *Protocol) Export(_ context.Context, invoker kernel.Invoker) (extension.Exporter, error) {
	key := invoker.URL().ServiceKey()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exporters == nil {
		return nil, kernel.Errorf(kernel.CodeUnknown, "injvm protocol destroyed; cannot export %s", key)
	}
	if _, dup := p.exporters[key]; dup {
		return nil, kernel.Errorf(kernel.CodeUnknown, "service %s is already exported on injvm; give it another group or version", key)
	}
	e := &exporter{p: p, key: key, invoker: invoker}
	p.exporters[key] = e
	return e, nil
}

// Refer returns an invoker of the service url names. The exporter is looked
// up on each call, so the order of export and refer does not matter.
func (p *Protocol) Refer(_ context.Context, url *kernel.URL) (kernel.Invoker, error) {
	return &invoker{p: p, url: url, key: url.ServiceKey()}, nil
}

// Destroy unexports everything.
func (p *Protocol) Destroy() {
	p.mu.Lock()
	p.exporters = nil
	p.mu.Unlock()
}

func (p *Protocol) lookup(key string) *exporter {
	p.mu.RLock()
	e := p.exporters[key]
	p.mu.RUnlock()
	return e
}

func (p *Protocol) keys() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	keys := make([]string, 0, len(p.exporters))
	for k := range p.exporters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type exporter struct {
	p       *Protocol
	key     string
	invoker kernel.Invoker
	once    sync.Once
}

func (e *exporter) Invoker() kernel.Invoker { return e.invoker }

func (e *exporter) Unexport() {
	e.once.Do(func() {
		e.p.mu.Lock()
		if e.p.exporters[e.key] == e {
			delete(e.p.exporters, e.key)
		}
		e.p.mu.Unlock()
	})
}

type invoker struct {
	p         *Protocol
	url       *kernel.URL
	key       string
	destroyed atomic.Bool
}

func (i *invoker) URL() *kernel.URL { return i.url }

func (i *invoker) IsAvailable() bool { return !i.destroyed.Load() && i.p.lookup(i.key) != nil }

func (i *invoker) Destroy() { i.destroyed.Store(true) }

func (i *invoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	if i.destroyed.Load() {
		return kernel.Result{}, kernel.Errorf(kernel.CodeNetwork, "injvm invoker of %s is destroyed", i.key)
	}
	e := i.p.lookup(i.key)
	if e == nil {
		exported := strings.Join(i.p.keys(), ", ")
		if exported == "" {
			exported = "none"
		}
		return kernel.Result{}, kernel.Errorf(kernel.CodeServiceNotFound,
			"no service %s is exported in this process over injvm (exported: %s); check interface, group and version", i.key, exported)
	}
	if err := ctx.Err(); err != nil {
		return kernel.Result{}, kernel.Wrap(kernel.CodeTimeout, err, "call of %s.%s", i.key, inv.Method)
	}
	// The provider gets its own copy: its filters may change attachments.
	return e.invoker.Invoke(ctx, inv.Clone())
}
