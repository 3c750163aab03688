package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// WasmSet is the App's WASM filters by name, for config changes.
type WasmSet map[string]*wasmfilter.Filter

// serviceChain is an exported service's filter chain, replaceable while
// the service is exported: the exporter holds this invoker, calls read the
// current chain.
type serviceChain struct {
	id    string
	inner innerInvoker
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
func (rt *Runtime) retire(iv kernel.Invoker) {
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

func (rt *Runtime) watchConfig() {
	if rt.cc != nil {
		rt.cc.Attach(rt.onConfig)
	}
}

func (rt *Runtime) unwatchConfig() {
	if rt.cc != nil {
		rt.cc.Attach(nil)
	}
}

// onConfig applies a new version of the document. A document that does
// not decode, or names an unknown extension, changes nothing.
func (rt *Runtime) onConfig(extension.ConfigChangedEvent) {
	// The latest version, whichever event brought us here: two deliveries
	// racing (a replay at start and a push) both end on it.
	ev := rt.cc.Latest()
	rt.obs.ConfigChanged(ev, rt.cc.URL().String())
	next, err := rt.cc.Merge(ev.Content)
	if err != nil {
		rt.obs.ConfigApplied(false, false, err)
		rt.log.Error("weft: config center document rejected; the running config stays", "err", err)
		return
	}
	report, err := rt.apply(next)
	rt.obs.ConfigApplied(len(report.applied) > 0, len(report.restart) > 0, err)
	switch {
	case err != nil:
		rt.log.Error("weft: config center change rejected; the running config stays", "config_center", rt.cc.Where(), "err", err)
	case len(report.applied) == 0 && len(report.restart) == 0:
	default:
		if len(report.applied) > 0 {
			rt.log.Info("weft: config center change applied", "config_center", rt.cc.Where(), "applied", strings.Join(report.applied, ", "))
		}
		if len(report.restart) > 0 {
			rt.log.Warn("weft: config center change needs a restart; not applied", "config_center", rt.cc.Where(), "keys", strings.Join(report.restart, ", "))
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
// applyRun is one apply: the config it moves from and to, the report, and
// what it will commit once every part checked out.
type applyRun struct {
	rt             *Runtime
	old, next, eff *config.Config
	rep            applyReport
	errs           []error
	commits        []func()
}

func (ar *applyRun) restart(path string) { ar.rep.restart = append(ar.rep.restart, path) }
func (ar *applyRun) applied(path string) { ar.rep.applied = append(ar.rep.applied, path) }

func (rt *Runtime) apply(next *config.Config) (applyReport, error) {
	rt.applyMu.Lock()
	defer rt.applyMu.Unlock()
	if rt.stopped {
		return applyReport{}, errors.New("the App is stopping")
	}
	ar := &applyRun{rt: rt, old: rt.cfg, next: next, eff: cloneConfig(rt.cfg)}
	ar.restartOnly()
	ar.provider()
	ar.consumer()
	ar.wasmFilters()
	if len(ar.errs) > 0 {
		return applyReport{}, errors.Join(ar.errs...)
	}
	for _, c := range ar.commits {
		c()
	}
	rt.cfg = ar.eff
	return ar.rep, nil
}

// restartOnly notes the parts that only a restart changes.
func (ar *applyRun) restartOnly() {
	if !reflect.DeepEqual(ar.old.Application, ar.next.Application) {
		ar.restart("application")
	}
	if !reflect.DeepEqual(ar.old.Protocols, ar.next.Protocols) {
		ar.restart("protocols")
	}
	if !reflect.DeepEqual(ar.old.Registries, ar.next.Registries) {
		ar.restart("registries")
	}
	if !reflect.DeepEqual(ar.old.Tracing, ar.next.Tracing) {
		ar.restart("tracing")
	}
	if !reflect.DeepEqual(ar.old.QoS, ar.next.QoS) {
		ar.restart("qos")
	}
}

// provider applies provider filter lists, which are dynamic.
func (ar *applyRun) provider() {
	op, np := ar.old.Provider, ar.next.Provider
	op.Filter, np.Filter, op.Services, np.Services = "", "", nil, nil
	if !reflect.DeepEqual(op, np) {
		ar.restart("provider (defaults other than filter)")
	}
	for _, id := range unionKeys(ar.old.Provider.Services, ar.next.Provider.Services) {
		path := "provider.services." + id
		oldSvc, inOld := ar.old.Provider.Services[id]
		newSvc, inNew := ar.next.Provider.Services[id]
		if !inOld || !inNew {
			ar.restart(path + " (added or removed)")
			continue
		}
		a, b := oldSvc, newSvc
		a.Filter, b.Filter = "", ""
		if a.Impl != nil && b.Impl != nil && a.Impl.Forward != b.Impl.Forward && a.Interface != "*" {
			ar.forward(id, path, b.Impl.Forward)
			ia, ib := *a.Impl, *b.Impl
			ia.Forward, ib.Forward = "", ""
			a.Impl, b.Impl = &ia, &ib
		}
		if !reflect.DeepEqual(a, b) {
			ar.restart(path + " (settings other than filter and impl.forward)")
		}
		oldList, newList := joinList(ar.old.Provider.Filter, oldSvc.Filter), joinList(ar.next.Provider.Filter, newSvc.Filter)
		if oldList == newList {
			continue
		}
		if err := ar.rt.filters.CheckNames(newList); err != nil {
			ar.errs = append(ar.errs, fmt.Errorf("%s.filter: %w", path, err))
			continue
		}
		for _, sc := range ar.rt.chains {
			if sc.id != id {
				continue
			}
			u := sc.inner.URL().WithParam(kernel.KeyServiceFilter, newList)
			filters, err := ar.rt.filters.Activate(u, kernel.KeyServiceFilter, kernel.GroupProvider)
			if err != nil {
				ar.errs = append(ar.errs, fmt.Errorf("%s.filter: %w", path, err))
				continue
			}
			chain := extension.BuildChain(sc.inner, filters)
			ar.commits = append(ar.commits, func() { sc.cur.Store(&chain) })
		}
		ar.applied(path + ".filter")
		e := ar.eff.Provider.Services[id]
		e.Filter = newSvc.Filter
		ar.eff.Provider.Services[id] = e
	}
	ar.eff.Provider.Filter = ar.next.Provider.Filter
}

// forward points a forwarding service at another of the App's references:
// calls in flight finish on the old one, the next go to the new one.
func (ar *applyRun) forward(id, path, to string) {
	ref, ok := ar.rt.forwards[id]
	if !ok {
		ar.restart(path + ".impl.forward (the service did not forward)")
		return
	}
	if _, referred := ar.rt.refs[to]; !referred {
		ar.errs = append(ar.errs, fmt.Errorf("%s.impl.forward: %q is not a reference this App refers (references: %s); a new reference takes a restart",
			path, to, strings.Join(ar.rt.refIDs, ", ")))
		return
	}
	ar.commits = append(ar.commits, func() { ref.Store(&to) })
	ar.applied(path + ".impl.forward")
	e := ar.eff.Provider.Services[id]
	im := *e.Impl
	im.Forward = to
	e.Impl = &im
	ar.eff.Provider.Services[id] = e
}

// consumer applies every setting of an existing reference, except what it
// refers to.
func (ar *applyRun) consumer() {
	oc, nc := ar.old.Consumer, ar.next.Consumer
	oc.References, nc.References = nil, nil
	defaultsChanged := !reflect.DeepEqual(oc, nc)
	for _, id := range unionKeys(ar.old.Consumer.References, ar.next.Consumer.References) {
		path := "consumer.references." + id
		orc, inOld := ar.old.Consumer.References[id]
		nrc, inNew := ar.next.Consumer.References[id]
		if !inOld || !inNew {
			ar.restart(path + " (added or removed)")
			continue
		}
		if orc.Interface != nrc.Interface || orc.Version != nrc.Version || orc.Group != nrc.Group ||
			orc.Protocol != nrc.Protocol || (orc.URL == "") != (nrc.URL == "") {
			ar.restart(path + " (interface, version, group, protocol, or url set/unset)")
			continue
		}
		r := ar.rt.refs[id]
		a, b := orc, nrc
		a.Routers, b.Routers = nil, nil
		switch {
		case !defaultsChanged && reflect.DeepEqual(a, b) && !reflect.DeepEqual(orc.Routers, nrc.Routers):
			routers, err := ar.rt.buildRouters(nrc)
			if err != nil {
				ar.errs = append(ar.errs, fmt.Errorf("%s.%w", path, err))
				continue
			}
			ar.commits = append(ar.commits, func() {
				r.routers = routers
				if r.gov != nil {
					// The governance rules' routers stay beside them.
					r.gov.Retarget(r.dir, routers)
				} else {
					r.dir.SetRouters(routers)
				}
			})
			ar.applied(path + ".routers")
		case defaultsChanged || !reflect.DeepEqual(orc, nrc):
			if err := checkReference(ar.rt, ar.next, path, nrc); err != nil {
				ar.errs = append(ar.errs, err)
				continue
			}
			nr, err := ar.rt.buildReference(ar.next, id, nrc)
			if err != nil {
				ar.errs = append(ar.errs, fmt.Errorf("%s: %w", path, err))
				continue
			}
			ar.commits = append(ar.commits, func() { ar.rt.rerefer(r, nr) })
			ar.applied(path + " (referred again)")
		default:
			continue
		}
		ar.eff.Consumer.References[id] = nrc
	}
	if defaultsChanged {
		refs := ar.eff.Consumer.References
		ar.eff.Consumer = ar.next.Consumer
		ar.eff.Consumer.References = refs
	}
}

// wasmFilters applies the WASM filters' own config, which is dynamic.
func (ar *applyRun) wasmFilters() {
	for _, name := range unionKeys(ar.old.Wasm.Filters, ar.next.Wasm.Filters) {
		path := "wasm.filters." + name
		ow, inOld := ar.old.Wasm.Filters[name]
		nw, inNew := ar.next.Wasm.Filters[name]
		if !inOld || !inNew {
			ar.restart(path + " (added or removed)")
			continue
		}
		a, b := ow, nw
		a.Config, b.Config = nil, nil
		if !reflect.DeepEqual(a, b) {
			ar.restart(path + " (settings other than config)")
		}
		if reflect.DeepEqual(ow.Config, nw.Config) {
			continue
		}
		f := ar.rt.wasm[name]
		settings := nw.Config
		ar.commits = append(ar.commits, func() {
			// SetConfig compiles; an error here leaves that filter's
			// config as it was.
			if err := f.SetConfig(context.Background(), settings); err != nil {
				ar.rt.log.Error("weft: config center: wasm filter config not applied", "filter", name, "err", err)
			}
		})
		ar.applied(path + ".config")
		e := ar.eff.Wasm.Filters[name]
		e.Config = nw.Config
		ar.eff.Wasm.Filters[name] = e
	}

}

// checkReference checks the extension names of a reference's new settings.
func checkReference(rt *Runtime, cfg *config.Config, path string, rc config.Reference) error {
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
	errs = append(errs, rt.checkMerger(path, rc)...)
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
func (rt *Runtime) rerefer(r, nr *reference) {
	iv, rd, err := rt.join(context.Background(), nr)
	if err != nil {
		rt.log.Error("weft: config center: reference not referred again; the old one stays", "reference", r.id, "err", err)
		return
	}
	if rd != nil {
		r.sub.Retarget(rd)
	}
	r.url, r.targets, r.routers, r.dir, r.joined = nr.url, nr.targets, nr.routers, nr.dir, nr.joined
	if r.gov != nil {
		r.gov.Retarget(nr.dir, nr.routers)
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
func cloneConfig(cfg *config.Config) *config.Config {
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
