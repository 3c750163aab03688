package weft

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

// wasmSet is the App's WASM filters by name, for config changes.
type wasmSet map[string]*wasmfilter.Filter

// serviceChain is an exported service's filter chain, replaceable while
// the service is exported: the exporter holds this invoker, calls read the
// current chain.
type serviceChain struct {
	id    string
	inner *proxy.ServiceInvoker
	cur   atomic.Pointer[kernel.Invoker]
}

func (s *serviceChain) URL() *kernel.URL { return s.inner.URL() }

func (s *serviceChain) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	return (*s.cur.Load()).Invoke(ctx, inv)
}

func (s *serviceChain) IsAvailable() bool { return (*s.cur.Load()).IsAvailable() }
func (s *serviceChain) Destroy()          { (*s.cur.Load()).Destroy() }

// liveInvoker counts the calls in flight on a reference's invoker, so that
// one replaced by a config change is destroyed when they have finished.
type liveInvoker struct {
	kernel.Invoker
	n atomic.Int64
}

func (l *liveInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	l.n.Add(1)
	defer l.n.Add(-1)
	return l.Invoker.Invoke(ctx, inv)
}

// drainLimit bounds how long a replaced reference invoker waits for its
// calls before it is destroyed anyway.
const drainLimit = time.Minute

// retire destroys a replaced reference invoker once its calls are done.
func (rt *runtime) retire(iv kernel.Invoker) {
	rt.drains.Add(1)
	go func() {
		defer rt.drains.Done()
		defer iv.Destroy()
		live, ok := iv.(*liveInvoker)
		if !ok {
			return
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(drainLimit)
		for live.n.Load() > 0 {
			select {
			case <-tick.C:
			case <-deadline:
				return
			case <-rt.stopCh:
				return
			}
		}
	}()
}

func (rt *runtime) watchConfig() {
	if rt.cc != nil {
		rt.cc.attach(rt.onConfig)
	}
}

func (rt *runtime) unwatchConfig() {
	if rt.cc != nil {
		rt.cc.attach(nil)
	}
}

// onConfig applies a new version of the document. A document that does
// not decode, or names an unknown extension, changes nothing.
func (rt *runtime) onConfig(extension.ConfigChangedEvent) {
	// The latest version, whichever event brought us here: two deliveries
	// racing (a replay at start and a push) both end on it.
	rt.cc.mu.Lock()
	ev := *rt.cc.latest
	rt.cc.mu.Unlock()
	rt.obs.configChanged(ev, rt.cc.url.String())
	next, err := rt.cc.merge(ev.Content)
	if err != nil {
		rt.obs.configApplied(false, false, err)
		rt.log.Error("weft: config center document rejected; the running config stays", "err", err)
		return
	}
	report, err := rt.apply(next)
	rt.obs.configApplied(len(report.applied) > 0, len(report.restart) > 0, err)
	switch {
	case err != nil:
		rt.log.Error("weft: config center change rejected; the running config stays", "config_center", rt.cc.where(), "err", err)
	case len(report.applied) == 0 && len(report.restart) == 0:
	default:
		if len(report.applied) > 0 {
			rt.log.Info("weft: config center change applied", "config_center", rt.cc.where(), "applied", strings.Join(report.applied, ", "))
		}
		if len(report.restart) > 0 {
			rt.log.Warn("weft: config center change needs a restart; not applied", "config_center", rt.cc.where(), "keys", strings.Join(report.restart, ", "))
		}
	}
}

// applyReport says what a change did.
type applyReport struct {
	applied []string // key paths applied
	restart []string // key paths that changed but need a restart
}

// apply makes the running App follow next where it can without a restart:
// every change is prepared (and checked) first; only if all of them can be
// made are they made. The App's config becomes the one that runs: next
// where applied, the old one where a restart is needed.
func (rt *runtime) apply(next *Config) (applyReport, error) {
	rt.applyMu.Lock()
	defer rt.applyMu.Unlock()
	var rep applyReport
	if rt.stopped {
		return rep, errors.New("the App is stopping")
	}
	old := rt.cfg
	eff := cloneConfig(old)
	var errs []error
	var commits []func()
	restart := func(path string) { rep.restart = append(rep.restart, path) }
	applied := func(path string) { rep.applied = append(rep.applied, path) }

	// Parts that only a restart changes.
	if !reflect.DeepEqual(old.Application, next.Application) {
		restart("application")
	}
	if !reflect.DeepEqual(old.Protocols, next.Protocols) {
		restart("protocols")
	}
	if !reflect.DeepEqual(old.Registries, next.Registries) {
		restart("registries")
	}
	if !reflect.DeepEqual(old.Tracing, next.Tracing) {
		restart("tracing")
	}
	if !reflect.DeepEqual(old.QoS, next.QoS) {
		restart("qos")
	}

	// Provider: filter lists are dynamic.
	op, np := old.Provider, next.Provider
	op.Filter, np.Filter, op.Services, np.Services = "", "", nil, nil
	if !reflect.DeepEqual(op, np) {
		restart("provider (defaults other than filter)")
	}
	for _, id := range unionKeys(old.Provider.Services, next.Provider.Services) {
		path := "provider.services." + id
		oldSvc, inOld := old.Provider.Services[id]
		newSvc, inNew := next.Provider.Services[id]
		if !inOld || !inNew {
			restart(path + " (added or removed)")
			continue
		}
		a, b := oldSvc, newSvc
		a.Filter, b.Filter = "", ""
		if !reflect.DeepEqual(a, b) {
			restart(path + " (settings other than filter)")
		}
		oldList, newList := joinList(old.Provider.Filter, oldSvc.Filter), joinList(next.Provider.Filter, newSvc.Filter)
		if oldList == newList {
			continue
		}
		if err := rt.filters.CheckNames(newList); err != nil {
			errs = append(errs, fmt.Errorf("%s.filter: %w", path, err))
			continue
		}
		for _, sc := range rt.chains {
			if sc.id != id {
				continue
			}
			u := sc.inner.URL().WithParam(kernel.KeyServiceFilter, newList)
			filters, err := rt.filters.Activate(u, kernel.KeyServiceFilter, kernel.GroupProvider)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.filter: %w", path, err))
				continue
			}
			chain := extension.BuildChain(kernel.Invoker(sc.inner), filters)
			commits = append(commits, func() { sc.cur.Store(&chain) })
		}
		applied(path + ".filter")
		e := eff.Provider.Services[id]
		e.Filter = newSvc.Filter
		eff.Provider.Services[id] = e
	}
	eff.Provider.Filter = next.Provider.Filter

	// Consumer: every setting of an existing reference is dynamic, except
	// what it refers to.
	oc, nc := old.Consumer, next.Consumer
	oc.References, nc.References = nil, nil
	defaultsChanged := !reflect.DeepEqual(oc, nc)
	for _, id := range unionKeys(old.Consumer.References, next.Consumer.References) {
		path := "consumer.references." + id
		orc, inOld := old.Consumer.References[id]
		nrc, inNew := next.Consumer.References[id]
		if !inOld || !inNew {
			restart(path + " (added or removed)")
			continue
		}
		if orc.Interface != nrc.Interface || orc.Version != nrc.Version || orc.Group != nrc.Group ||
			orc.Protocol != nrc.Protocol || (orc.URL == "") != (nrc.URL == "") {
			restart(path + " (interface, version, group, protocol, or url set/unset)")
			continue
		}
		r := rt.refs[id]
		a, b := orc, nrc
		a.Routers, b.Routers = nil, nil
		switch {
		case !defaultsChanged && reflect.DeepEqual(a, b) && !reflect.DeepEqual(orc.Routers, nrc.Routers):
			routers, err := rt.buildRouters(nrc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%w", path, err))
				continue
			}
			commits = append(commits, func() {
				r.routers = routers
				if r.gov != nil {
					// The governance rules' routers stay beside them.
					r.gov.retarget(r.dir, routers)
				} else {
					r.dir.SetRouters(routers)
				}
			})
			applied(path + ".routers")
		case defaultsChanged || !reflect.DeepEqual(orc, nrc):
			if err := checkReference(rt, next, path, nrc); err != nil {
				errs = append(errs, err)
				continue
			}
			nr, err := rt.buildReference(next, id, nrc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				continue
			}
			commits = append(commits, func() { rt.rerefer(r, nr) })
			applied(path + " (referred again)")
		default:
			continue
		}
		eff.Consumer.References[id] = nrc
	}
	if defaultsChanged {
		refs := eff.Consumer.References
		eff.Consumer = next.Consumer
		eff.Consumer.References = refs
	}

	// WASM filters: their own config is dynamic.
	for _, name := range unionKeys(old.Wasm.Filters, next.Wasm.Filters) {
		path := "wasm.filters." + name
		ow, inOld := old.Wasm.Filters[name]
		nw, inNew := next.Wasm.Filters[name]
		if !inOld || !inNew {
			restart(path + " (added or removed)")
			continue
		}
		a, b := ow, nw
		a.Config, b.Config = nil, nil
		if !reflect.DeepEqual(a, b) {
			restart(path + " (settings other than config)")
		}
		if reflect.DeepEqual(ow.Config, nw.Config) {
			continue
		}
		f := rt.wasm[name]
		settings := nw.Config
		commits = append(commits, func() {
			// SetConfig compiles; an error here leaves that filter's
			// config as it was.
			if err := f.SetConfig(context.Background(), settings); err != nil {
				rt.log.Error("weft: config center: wasm filter config not applied", "filter", name, "err", err)
			}
		})
		applied(path + ".config")
		e := eff.Wasm.Filters[name]
		e.Config = nw.Config
		eff.Wasm.Filters[name] = e
	}

	if len(errs) > 0 {
		return applyReport{}, errors.Join(errs...)
	}
	for _, c := range commits {
		c()
	}
	rt.cfg = eff
	return rep, nil
}

// checkReference checks the extension names of a reference's new settings.
func checkReference(rt *runtime, cfg *Config, path string, rc ReferenceConfig) error {
	var errs []error
	check := func(at string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	check("consumer.filter", rt.filters.CheckNames(cfg.Consumer.Filter))
	check(path+".filter", rt.filters.CheckNames(rc.Filter))
	if n := firstString(rc.Cluster, cfg.Consumer.Cluster); n != "" && !rt.clusters.Has(n) {
		check(path+".cluster", &kernel.UnknownError{Point: "cluster", Name: n, Known: rt.clusters.Names()})
	}
	lbs := map[string]string{path + ".loadbalance": firstString(rc.LoadBalance, cfg.Consumer.LoadBalance)}
	for m, mc := range rc.Methods {
		lbs[path+".methods."+m+".loadbalance"] = mc.LoadBalance
	}
	for at, n := range lbs {
		if n != "" && !rt.lbs.Has(n) {
			check(at, &kernel.UnknownError{Point: "loadbalance", Name: n, Known: rt.lbs.Names()})
		}
	}
	return errors.Join(errs...)
}

// rerefer replaces r's invoker by one built from nr's settings. Calls
// already made finish on the old invoker, which is destroyed after them. A
// discovering reference keeps its registry subscription: the new directory
// starts from the providers known now.
func (rt *runtime) rerefer(r, nr *reference) {
	iv, rd, err := rt.join(context.Background(), nr)
	if err != nil {
		rt.log.Error("weft: config center: reference not referred again; the old one stays", "reference", r.id, "err", err)
		return
	}
	if rd != nil {
		r.sub.Retarget(rd)
	}
	r.url, r.targets, r.routers, r.dir = nr.url, nr.targets, nr.routers, nr.dir
	if r.gov != nil {
		r.gov.retarget(nr.dir, nr.routers)
	}
	if old := r.invoker.Swap(&iv); old != nil {
		rt.retire(*old)
	}
}

func unionKeys[V any](a, b map[string]V) []string {
	m := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		m[k] = struct{}{}
	}
	for k := range b {
		m[k] = struct{}{}
	}
	return sortedKeys(m)
}

// cloneConfig copies cfg deep enough that apply can change its maps.
func cloneConfig(cfg *Config) *Config {
	c := *cfg
	c.Provider.Services = cloneMap(cfg.Provider.Services)
	c.Consumer.References = cloneMap(cfg.Consumer.References)
	c.Wasm.Filters = cloneMap(cfg.Wasm.Filters)
	return &c
}

func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
