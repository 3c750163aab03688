package cluster

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// A reference of several groups, or of several registries, is a cluster of
// clusters, as in Dubbo: each group (each registry) is a cluster of its own
// providers, and the reference's cluster (Mergeable, ZoneAware) chooses
// among, or merges, those. GroupDirectory and RegistriesDirectory are the
// directories of such a reference: they list one invoker per part.

// Part is one sub-cluster: the directory its providers go to and the
// invoker that joins it.
type Part struct {
	Dir     PartDirectory
	Invoker kernel.Invoker
}

// PartDirectory is a part's directory: a RegistryDirectory, or a
// GroupDirectory (the groups of one registry).
type PartDirectory interface {
	extension.NotifyListener
	extension.RoutedDirectory
	extension.ConfiguredDirectory
	extension.InvokerLister
}

// MakePart builds the part of a group or registry.
type MakePart func(key string) (Part, error)

var (
	_ PartDirectory = (*RegistryDirectory)(nil)
	_ PartDirectory = (*GroupDirectory)(nil)
	_ PartDirectory = (*RegistriesDirectory)(nil)
)

// parts is what both directories share: the parts by key, and their
// invokers in the order of their keys, replaced whole.
type parts struct {
	url  *kernel.URL
	log  *slog.Logger
	make MakePart

	mu    sync.Mutex
	byKey map[string]Part
	// The routers and override rules last set, which a new part gets too.
	routers    []extension.Router
	routed     bool
	configure  func([]*kernel.URL) []*kernel.URL
	configured bool

	list      atomic.Pointer[[]kernel.Invoker]
	destroyed atomic.Bool
}

func (p *parts) init(url *kernel.URL, log *slog.Logger, make MakePart) {
	p.url, p.log, p.make, p.byKey = url, log, make, map[string]Part{}
	p.list.Store(&[]kernel.Invoker{})
}

// add makes the part of key; p.mu is held.
func (p *parts) add(key string) (Part, error) {
	part, err := p.make(key)
	if err != nil {
		return Part{}, err
	}
	if p.routed {
		part.Dir.SetRouters(p.routers)
	}
	if p.configured {
		part.Dir.SetConfigure(p.configure)
	}
	p.byKey[key] = part
	p.relist()
	return part, nil
}

// drop destroys the part of key; p.mu is held.
func (p *parts) drop(key string) {
	part := p.byKey[key]
	delete(p.byKey, key)
	p.relist()
	part.Invoker.Destroy()
}

func (p *parts) relist() {
	keys := slices.Sorted(maps.Keys(p.byKey))
	list := make([]kernel.Invoker, len(keys))
	for i, k := range keys {
		list[i] = p.byKey[k].Invoker
	}
	p.list.Store(&list)
}

// URL is the reference's URL.
func (p *parts) URL() *kernel.URL { return p.url }

// List returns every part's invoker, available or not: the reference's
// cluster judges them (a part's routers ran inside it).
func (p *parts) List(context.Context, *kernel.Invocation) ([]kernel.Invoker, error) {
	if p.destroyed.Load() {
		return nil, kernel.Errorf(kernel.CodeNoProvider, "directory of %s is destroyed", p.url.ServiceKey())
	}
	return *p.list.Load(), nil
}

// IsAvailable reports whether any part is.
func (p *parts) IsAvailable() bool {
	if p.destroyed.Load() {
		return false
	}
	for _, iv := range *p.list.Load() {
		if iv.IsAvailable() {
			return true
		}
	}
	return false
}

// Invokers returns every part's providers, before routing (QoS's ls).
func (p *parts) Invokers() []kernel.Invoker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all []kernel.Invoker
	for _, k := range slices.Sorted(maps.Keys(p.byKey)) {
		all = append(all, p.byKey[k].Dir.Invokers()...)
	}
	return all
}

// SetRouters gives every part's directory the routers.
func (p *parts) SetRouters(routers []extension.Router) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routers, p.routed = routers, true
	for _, part := range p.byKey {
		part.Dir.SetRouters(routers)
	}
}

// SetConfigure gives every part's directory the override rules.
func (p *parts) SetConfigure(configure func([]*kernel.URL) []*kernel.URL) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.configure, p.configured = configure, true
	for _, part := range p.byKey {
		part.Dir.SetConfigure(configure)
	}
}

// Destroy destroys every part.
func (p *parts) Destroy() {
	if p.destroyed.Swap(true) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.byKey {
		p.drop(k)
	}
}

// GroupDirectory is the directory of a reference of several groups (Dubbo's
// multi-group RegistryDirectory): the registry's list is split by each
// provider's group, and each group is a part, made when the group first
// appears and destroyed when its providers are all gone.
type GroupDirectory struct{ parts }

// NewGroupDirectory returns an empty directory for the consumer URL url;
// make builds the part of a group.
func NewGroupDirectory(url *kernel.URL, log *slog.Logger, make MakePart) *GroupDirectory {
	d := &GroupDirectory{}
	d.init(url, log, make)
	return d
}

// Notify gives each group's part its providers. An empty list goes to every
// part, which keeps its last one (empty protection) or empties.
func (d *GroupDirectory) Notify(urls []*kernel.URL) {
	if d.destroyed.Load() {
		return
	}
	byGroup := map[string][]*kernel.URL{}
	for _, u := range urls {
		g := u.Param(kernel.KeyGroup)
		byGroup[g] = append(byGroup[g], u)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(urls) == 0 {
		for _, part := range d.byKey {
			part.Dir.Notify(nil)
		}
		return
	}
	for g := range d.byKey {
		if _, stays := byGroup[g]; !stays {
			d.log.Info("weft: group left: none of its providers is listed", "service", d.url.ServiceKey(), "group", g)
			d.drop(g)
		}
	}
	for g, list := range byGroup {
		part, ok := d.byKey[g]
		if !ok {
			var err error
			if part, err = d.add(g); err != nil {
				d.log.Error("weft: cannot join a group's providers", "service", d.url.ServiceKey(), "group", g, "err", err)
				continue
			}
		}
		part.Dir.Notify(list)
	}
}

// RegistriesDirectory is the directory of a reference subscribed in several
// registries (Java's StaticDirectory of one cluster per registry): each
// registry is a part, made at once, which that registry's subscription
// feeds (Registry).
type RegistriesDirectory struct{ parts }

// NewRegistriesDirectory makes the part of every registry id.
func NewRegistriesDirectory(url *kernel.URL, log *slog.Logger, ids []string, make MakePart) (*RegistriesDirectory, error) {
	d := &RegistriesDirectory{}
	d.init(url, log, make)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if _, err := d.add(id); err != nil {
			for k := range d.byKey {
				d.drop(k)
			}
			return nil, err
		}
	}
	return d, nil
}

// Registry returns what hears the providers registry id lists (nil for a
// registry it has no part for).
func (d *RegistriesDirectory) Registry(id string) extension.NotifyListener {
	d.mu.Lock()
	defer d.mu.Unlock()
	if part, ok := d.byKey[id]; ok {
		return part.Dir
	}
	return nil
}

// Notify gives every registry's part the list: what a subscription that
// does not tell the registries apart can do.
func (d *RegistriesDirectory) Notify(urls []*kernel.URL) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, part := range d.byKey {
		part.Dir.Notify(urls)
	}
}

// Relabeled returns iv under the URL u: a registry's part says by its URL
// which registry it stands for (its zone, preference and weight).
func Relabeled(iv kernel.Invoker, u *kernel.URL) kernel.Invoker { return &relabeled{iv, u} }

type relabeled struct {
	kernel.Invoker
	url *kernel.URL
}

func (r *relabeled) URL() *kernel.URL { return r.url }
