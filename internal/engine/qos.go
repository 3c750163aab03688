package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/qos"
	"github.com/weftrpc/weft/registry"
)

// lifeState is the App's life as the QoS probes see it. Flags, not a lock:
// a probe must answer at once, whatever the App is doing (a slow registry
// call holds the registration locks).
type lifeState struct {
	started  atomic.Bool // runtime.start finished: everything exported, registered and referred
	stopping atomic.Bool // runtime.stop began
	stopped  atomic.Bool // runtime.stop ended
	srv      atomic.Pointer[qos.Server]
}

// qosApp is the App as the QoS server sees it.
type qosApp struct{ rt *Runtime }

var _ qos.App = qosApp{}

func (q qosApp) Services() []qos.Service {
	rt := q.rt
	regs := rt.registrations()
	rt.regMu.Lock()
	exported := append([]exportedURL(nil), rt.exported...)
	rt.regMu.Unlock()
	out := make([]qos.Service, 0, len(rt.services))
	for _, s := range rt.services {
		sv := qos.Service{ID: s.id, Key: s.urls[0].ServiceKey(), Filters: q.serviceFilters(s)}
		for _, e := range exported {
			if e.service == s.id {
				sv.Exports = append(sv.Exports, e.url.Protocol+"://"+e.url.Address())
			}
		}
		for _, r := range regs {
			if r.Service == s.id {
				name := r.Registry
				if r.Level == registry.RegisterInstance {
					name += " (instance)"
				}
				sv.Registries = append(sv.Registries, qos.Registration{Registry: name, Registered: r.Registered})
			}
		}
		out = append(out, sv)
	}
	return out
}

func (q qosApp) References() []qos.Reference {
	rt := q.rt
	// A config center's change replaces a reference's directory under
	// applyMu.
	rt.applyMu.Lock()
	defer rt.applyMu.Unlock()
	out := make([]qos.Reference, 0, len(rt.refIDs))
	for _, id := range rt.refIDs {
		r := rt.refs[id]
		ref := qos.Reference{ID: id, Key: r.url.ServiceKey(), Discover: r.discover,
			Filters: q.filterNames(r.url, kernel.KeyReferenceFilter, kernel.GroupConsumer)}
		// r.dir is set by refer while the App starts; started (stored after
		// every refer) orders that before this read.
		if !rt.life.started.Load() {
			out = append(out, ref)
			continue
		}
		if d, ok := r.dir.(extension.InvokerLister); ok && r.invoker.Load() != nil {
			ej, _ := r.dir.(cluster.EjectionReporter)
			for _, iv := range d.Invokers() {
				if u := iv.URL(); u != nil {
					p := u.Protocol + "://" + u.Address()
					if ej != nil {
						if e, out := ej.Ejected(iv); out {
							// Outlier detection holds it out: say for how
							// long and why, as an operator asks first.
							left := time.Until(e.Until)
							if left >= 10*time.Second {
								left = left.Round(time.Second)
							} else {
								left = left.Round(10 * time.Millisecond)
							}
							p += fmt.Sprintf(" (ejected for %v more, %d times: %s)", left, e.Times, e.Why)
						}
					}
					ref.Providers = append(ref.Providers, p)
				}
			}
		}
		out = append(out, ref)
	}
	return out
}

func (q qosApp) Ports() []qos.Port {
	rt := q.rt
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	var out []qos.Port
	seen := map[string]bool{}
	for _, e := range rt.exported {
		if e.url.Protocol == "injvm" {
			continue // in process: no port
		}
		p := qos.Port{Protocol: e.url.Protocol, Addr: e.url.Address()}
		if k := p.Protocol + " " + p.Addr; !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

func (q qosApp) Online(ctx context.Context, service string) ([]string, error) {
	return q.setOnline(ctx, service, true)
}

func (q qosApp) Offline(ctx context.Context, service string) ([]string, error) {
	return q.setOnline(ctx, service, false)
}

func (q qosApp) setOnline(ctx context.Context, service string, on bool) ([]string, error) {
	ids, err := q.match(service)
	if err != nil {
		return nil, err
	}
	return q.rt.setOnline(ctx, ids, on)
}

// match finds the services a QoS argument names, as Dubbo's online and
// offline do: all of them for none (or "*"); else those whose id,
// interface or service key is the argument, or, when none is, those whose
// interface or service key the argument matches as a regular expression
// (Java's String.matches: the whole name).
func (q qosApp) match(pattern string) (map[string]bool, error) {
	ids := map[string]bool{}
	services := q.rt.services
	if pattern == "" || pattern == "*" {
		for _, s := range services {
			ids[s.id] = true
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("%w: this App exports no service (it only consumes)", qos.ErrNotFound)
		}
		return ids, nil
	}
	for _, s := range services {
		if pattern == s.id || pattern == s.urls[0].Path || pattern == s.urls[0].ServiceKey() {
			ids[s.id] = true
		}
	}
	if len(ids) == 0 {
		if re, err := regexp.Compile("^(?:" + pattern + ")$"); err == nil {
			for _, s := range services {
				if re.MatchString(s.urls[0].Path) || re.MatchString(s.urls[0].ServiceKey()) {
					ids[s.id] = true
				}
			}
		}
	}
	if len(ids) == 0 {
		var known []string
		for _, s := range services {
			known = append(known, s.id+" ("+s.urls[0].ServiceKey()+")")
		}
		return nil, fmt.Errorf("%w: no service matches %q; services: %s", qos.ErrNotFound, pattern, strings.Join(known, ", "))
	}
	return ids, nil
}

// Ready follows Dubbo 3's readiness: the App has started (every service
// exported and registered, every reference referred) and is not stopping,
// and, if it exports services, at least one of them is online (offline of
// every service makes it unready, offline of some does not).
func (q qosApp) Ready() (bool, string) {
	rt := q.rt
	switch {
	case rt.life.stopping.Load():
		return false, "stopping"
	case !rt.life.started.Load():
		return false, "starting: exporting, registering and referring"
	case len(rt.services) == 0:
		return true, ""
	}
	regs := rt.registrations()
	for _, s := range rt.services {
		has, on := false, false
		for _, r := range regs {
			if r.Service == s.id {
				has = true
				on = on || r.Registered
			}
		}
		if !has || on {
			return true, "" // online (a service without registries is always)
		}
	}
	return false, "offline: every service is out of the registries (qos offline); online brings them back"
}

// Live is true from the moment the QoS server starts until the App has
// stopped: during a graceful stop the process is draining, not dead, and a
// failed liveness probe would have Kubernetes kill it mid-drain.
func (q qosApp) Live() (bool, string) {
	if q.rt.life.stopped.Load() {
		return false, "stopped"
	}
	return true, ""
}

func (q qosApp) Started() (bool, string) {
	if q.rt.life.started.Load() {
		return true, ""
	}
	return false, "starting: exporting, registering and referring"
}

// serviceFilters is s's provider chain from the config in effect (a config
// center may have changed its filter list).
func (q qosApp) serviceFilters(s *service) []string {
	cfg := q.rt.Config()
	list := joinList(cfg.Provider.Filter, cfg.Provider.Services[s.id].Filter)
	return q.filterNames(s.urls[0].WithParam(kernel.KeyServiceFilter, list), kernel.KeyServiceFilter, kernel.GroupProvider)
}

// filterNames is the chain a filter list activates on u, in the order a
// call meets it, a WASM filter marked so.
func (q qosApp) filterNames(u *kernel.URL, key, group string) []string {
	names, err := q.rt.filters.ActivateNames(u, key, group)
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	for i, n := range names {
		if _, ok := q.rt.wasm[n]; ok {
			names[i] = n + " (wasm)"
		}
	}
	return names
}

// Invoke is QoS invoke: a generic call of one service of this App, through
// its filters, its result as bounded JSON.
func (q qosApp) Invoke(ctx context.Context, target, method, argsJSON string) (string, error) {
	ids, err := q.match(target)
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("%q names %d services (%s): name one by its id or service key", target, len(ids), strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
	}
	var id string
	for id = range ids {
	}
	q.rt.regMu.Lock()
	chain := q.rt.callable[id]
	q.rt.regMu.Unlock()
	if chain == nil {
		return "", fmt.Errorf("%w: service %s is not exported yet", qos.ErrNotFound, id)
	}
	args, err := proxy.JSONArgs(argsJSON)
	if err != nil {
		return "", fmt.Errorf("arguments: %v (want JSON values separated by commas: \"x\", 1, {\"k\": 2})", err)
	}
	res, err := chain.Invoke(ctx, proxy.GenericInvocation(method, nil, args))
	if err != nil {
		return "", err
	}
	// The result is the App's own, but may be large or cyclic: one bounded
	// walk (view) makes it JSON.
	out, err := json.Marshal(view.JSONWith(res.Value, qosLimits))
	if err != nil {
		return "", fmt.Errorf("result %T is not printable as JSON: %v", res.Value, err)
	}
	return string(out), nil
}

// qosLimits bound what invoke prints.
var qosLimits = view.Limits{MaxDepth: 100, MaxNodes: 100_000, MaxBytes: 4 << 20}
