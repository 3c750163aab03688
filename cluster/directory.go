package cluster

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// base is what both directories share: an immutable snapshot of invokers,
// replaced whole, and the router chain applied on each List.
type base struct {
	url       *kernel.URL
	invokers  atomic.Pointer[[]kernel.Invoker]
	routers   *RouterChain
	destroyed atomic.Bool
	outlier   *outlier // nil unless the reference sets `outlier`
	// groups are the detectors the providers' own URLs ask for (a mesh
	// cluster's outlier_detection, KeyOutlierGroup), when the reference
	// sets none; nil: none.
	groups atomic.Pointer[outlierGroups]
}

// outlierFor is the detector that watches iv and the providers it is
// judged among; nil: none.
func (d *base) outlierFor(iv kernel.Invoker) (*outlier, []kernel.Invoker) {
	if d.outlier != nil {
		return d.outlier, d.Invokers()
	}
	if g := d.groups.Load(); g != nil {
		if grp := g.by[iv.URL().Param(KeyOutlierGroup)]; grp != nil {
			return grp.o, grp.members
		}
	}
	return nil, nil
}

// Observe tells the directory how a call to iv ended (extension.
// OutcomeObserver): its outlier detection, when on, ejects a provider
// whose calls keep failing.
func (d *base) Observe(iv kernel.Invoker, err error) {
	if o, all := d.outlierFor(iv); o != nil {
		o.observe(iv, err, all)
	}
}

// Ejected reports whether outlier detection holds iv out now, until when,
// how often it was ejected and why (for QoS's ls).
func (d *base) Ejected(iv kernel.Invoker) (Ejection, bool) {
	o, _ := d.outlierFor(iv)
	if o == nil {
		return Ejection{}, false
	}
	return o.ejected(iv)
}

// Ejections counts the ejections since the directory was made, and the
// providers out now (for metrics).
func (d *base) Ejections() (total int64, out int64) {
	if d.outlier != nil {
		return d.outlier.ejections.Load(), int64(d.outlier.out.Load())
	}
	if g := d.groups.Load(); g != nil {
		for _, grp := range g.by {
			total += grp.o.ejections.Load()
			out += int64(grp.o.out.Load())
		}
	}
	return total, out
}

func (d *base) URL() *kernel.URL { return d.url }

// Invokers returns the current snapshot, before routing.
func (d *base) Invokers() []kernel.Invoker {
	if p := d.invokers.Load(); p != nil {
		return *p
	}
	return nil
}

// SetRouters replaces the directory's routers (nil: none).
func (d *base) SetRouters(routers []extension.Router) { d.routers.SetRouters(routers) }

// List returns the available invokers the routers allow for inv. It
// allocates only when an invoker is unavailable or a router narrows the list.
//
// A list that comes out empty is made again from the directory's current
// snapshot when a notification replaced it meanwhile: a call that loaded
// the old snapshot just before a registry swapped every provider (a
// priority failover, a rollout) finds the old invokers destroyed by the
// time it checks them, while the new ones are up. Without this second look
// such a call fails with "no provider" although providers are listed.
func (d *base) List(_ context.Context, inv *kernel.Invocation) ([]kernel.Invoker, error) {
	for look := 0; ; look++ {
		if d.destroyed.Load() {
			return nil, kernel.Errorf(kernel.CodeNoProvider, "directory of %s is destroyed", d.url.ServiceKey())
		}
		snap := d.invokers.Load()
		list := d.route(snap, inv)
		// Bounded: a registry that swaps its list on every call must not
		// hold the call here.
		if len(list) > 0 || look == maxListLooks-1 || d.invokers.Load() == snap {
			return list, nil
		}
	}
}

// routeAll is what the routers allow inv of every invoker, available or
// not: to explain an empty List.
func (d *base) routeAll(inv *kernel.Invocation) []kernel.Invoker {
	return d.routers.Route(d.Invokers(), d.url, inv)
}

// maxListLooks bounds how often List looks again at a replaced snapshot.
const maxListLooks = 3

// route is List on one snapshot: its available invokers, less those
// outlier detection holds out, through the routers.
func (d *base) route(snap *[]kernel.Invoker, inv *kernel.Invocation) []kernel.Invoker {
	var all []kernel.Invoker
	if snap != nil {
		all = *snap
	}
	list := all
	for i, iv := range all {
		if !iv.IsAvailable() {
			list = append([]kernel.Invoker(nil), all[:i]...)
			for _, rest := range all[i+1:] {
				if rest.IsAvailable() {
					list = append(list, rest)
				}
			}
			break
		}
	}
	if d.outlier != nil {
		list = d.outlier.in(list)
	} else if g := d.groups.Load(); g != nil {
		list = g.in(list)
	}
	return d.routers.Route(list, d.url, inv)
}

// CallPolicy is extension.PolicyDirectory: what the directory's routers
// say of inv beyond where it goes (deadline, retries, faults, balancer,
// admission).
func (d *base) CallPolicy(inv *kernel.Invocation) *extension.CallPolicy {
	return d.routers.CallPolicy(d.url, inv)
}

// IsAvailable reports whether any invoker is.
func (d *base) IsAvailable() bool {
	if d.destroyed.Load() {
		return false
	}
	for _, iv := range d.Invokers() {
		if iv.IsAvailable() {
			return true
		}
	}
	return false
}

// StaticDirectory is a fixed list of invokers: the providers named by a
// reference's `url` setting, or a single in-process one.
type StaticDirectory struct{ base }

// NewStaticDirectory lists invokers for the consumer URL url; log hears
// its outlier detection (nil: slog's default).
func NewStaticDirectory(url *kernel.URL, invokers []kernel.Invoker, log *slog.Logger) *StaticDirectory {
	d := &StaticDirectory{}
	d.url, d.routers, d.outlier = url, NewRouterChain(), newOutlier(url, log)
	list := append([]kernel.Invoker(nil), invokers...)
	d.invokers.Store(&list)
	return d
}

var _ extension.Directory = (*StaticDirectory)(nil)

// Destroy destroys every invoker.
func (d *StaticDirectory) Destroy() {
	if d.destroyed.Swap(true) {
		return
	}
	for _, iv := range d.Invokers() {
		iv.Destroy()
	}
}

// KeyEmptyProtection set to false on a reference lets an empty registry push
// empty its provider list; by default (true) the last list is kept, since an
// empty push is more often a registry hiccup than every provider gone.
const KeyEmptyProtection = "empty.protection"

// KeyProtocols on a consumer URL lists, comma-separated, the protocols of
// the providers it takes from the registry (Dubbo's consumer `protocol`);
// empty: all.
const KeyProtocols = "protocols"

// RegistryDirectory keeps a reference's invokers in step with a registry: it
// is the NotifyListener of the consumer's subscription. Each notification is
// the full provider list: providers that stay keep their invoker (and its
// connection), new ones are referred, those that left are destroyed.
type RegistryDirectory struct {
	base
	refer func(provider *kernel.URL) (kernel.Invoker, error)
	log   *slog.Logger

	mu    sync.Mutex
	byKey map[string]kernel.Invoker
	// merge lays the consumer's settings over each listed provider URL;
	// configure then applies the override rules (Dubbo's configurators)
	// to the merged list, so that an operator's override wins over both,
	// as in Java. last is the registries' last list, run again through
	// them when the rules change.
	merge     func(*kernel.URL) *kernel.URL
	configure func([]*kernel.URL) []*kernel.URL
	last      []*kernel.URL
	notified  bool
}

// NewRegistryDirectory returns an empty directory for the consumer URL url;
// refer turns a provider URL into an invoker (protocol refer plus the
// per-invoker filter chain).
func NewRegistryDirectory(url *kernel.URL, refer func(*kernel.URL) (kernel.Invoker, error), log *slog.Logger) *RegistryDirectory {
	d := &RegistryDirectory{refer: refer, log: log, byKey: map[string]kernel.Invoker{}}
	d.url, d.routers, d.outlier = url, NewRouterChain(), newOutlier(url, log)
	empty := []kernel.Invoker{}
	d.invokers.Store(&empty)
	return d
}

var (
	_ extension.Directory      = (*RegistryDirectory)(nil)
	_ extension.NotifyListener = (*RegistryDirectory)(nil)
)

// SetMerge sets how each listed provider URL gets the consumer's settings
// (before the first Notify).
func (d *RegistryDirectory) SetMerge(merge func(*kernel.URL) *kernel.URL) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.merge = merge
}

// SetConfigure sets the override rules applied to the merged provider
// list (nil: none) and applies them to the last list at once: providers
// whose URL the rules change are referred again with their new settings,
// and those the rules disable leave the directory.
func (d *RegistryDirectory) SetConfigure(configure func([]*kernel.URL) []*kernel.URL) {
	if d.destroyed.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.configure = configure
	if d.notified {
		d.apply(d.last, false)
	}
}

// Notify replaces the provider list.
func (d *RegistryDirectory) Notify(urls []*kernel.URL) {
	if d.destroyed.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.apply(urls, true)
}

// apply makes the directory hold urls (a registry's list, merged and
// configured here); fromRegistry is false when the rules changed.
func (d *RegistryDirectory) apply(urls []*kernel.URL, fromRegistry bool) {
	if fromRegistry && len(urls) == 0 && d.url.ParamBool(KeyEmptyProtection, true) && len(d.byKey) > 0 {
		d.log.Warn("weft: registry pushed an empty provider list; keeping the last one", "service", d.url.ServiceKey(), "kept", len(d.byKey))
		return
	}
	d.last, d.notified = urls, true
	wanted := d.url.Param(KeyProtocols)
	targets := make([]*kernel.URL, 0, len(urls))
	for _, u := range urls {
		if wanted != "" && !slices.Contains(strings.Split(wanted, ","), u.Protocol) {
			continue
		}
		if d.merge != nil {
			u = d.merge(u)
		}
		targets = append(targets, u)
	}
	if d.configure != nil {
		targets = d.configure(targets)
	}
	next := make(map[string]kernel.Invoker, len(targets))
	list := make([]kernel.Invoker, 0, len(targets))
	var added []string
	for _, u := range targets {
		key := u.String()
		if _, dup := next[key]; dup {
			continue
		}
		iv, ok := d.byKey[key]
		if !ok {
			var err error
			if iv, err = d.refer(u); err != nil {
				d.log.Error("weft: cannot refer provider", "service", d.url.ServiceKey(), "url", key, "err", err)
				continue
			}
			added = append(added, u.Address())
		}
		next[key] = iv
		list = append(list, iv)
	}
	d.invokers.Store(&list)
	if d.outlier == nil {
		d.regroup(list, d.log)
	}
	var dropped []string
	for key, iv := range d.byKey {
		if _, stays := next[key]; !stays {
			// An operator wants each provider that leaves, by name: a
			// drop nobody expected is how an outage starts.
			d.log.Warn("weft: provider dropped: the registry no longer lists it", "service", d.url.ServiceKey(), "provider", iv.URL().Address())
			dropped = append(dropped, iv.URL().Address())
			iv.Destroy()
		}
	}
	d.byKey = next
	if len(added) > 0 || len(dropped) > 0 {
		sort.Strings(added)
		sort.Strings(dropped)
		d.log.Info("weft: providers changed", "service", d.url.ServiceKey(), "providers", len(list),
			"added", strings.Join(added, ","), "dropped", strings.Join(dropped, ","))
	}
}

// Destroy destroys every invoker; later notifications are ignored.
func (d *RegistryDirectory) Destroy() {
	if d.destroyed.Swap(true) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, iv := range d.byKey {
		iv.Destroy()
	}
	d.byKey = map[string]kernel.Invoker{}
	empty := []kernel.Invoker{}
	d.invokers.Store(&empty)
}
