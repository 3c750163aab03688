package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Outlier detection (Envoy's, which grpc-go's xDS client also follows): a
// reference's directory ejects a provider whose calls keep failing, for a
// time that grows each time it is ejected again, and takes it back on its
// own when that time is over. The keys go on the reference's `params`.
const (
	KeyOutlier                = "outlier"                    // "true" turns it on
	KeyOutlierConsecutive     = "outlier.consecutive.errors" // failures in a row that eject; 0: not watched
	KeyOutlierInterval        = "outlier.interval"           // ms between evaluations of the failure share
	KeyOutlierBaseEjection    = "outlier.base.ejection"      // ms an ejection lasts, times how often the provider was ejected
	KeyOutlierMaxEjection     = "outlier.max.ejection"       // ms an ejection lasts at most
	KeyOutlierMaxPercent      = "outlier.max.percent"        // % of the providers that may be out at once (at least one)
	KeyOutlierFailurePercent  = "outlier.failure.percent"    // % of an interval's calls failing that ejects; 0: not watched
	KeyOutlierFailureVolume   = "outlier.failure.volume"     // calls a provider needs in the interval to be judged on its share
	KeyOutlierFailureMinHosts = "outlier.failure.min.hosts"  // providers with that volume needed before any is judged
	KeyOutlierSuccessStdev    = "outlier.success.stdev"      // Envoy's success_rate_stdev_factor (thousandths); 0: not watched
	KeyOutlierSuccessVolume   = "outlier.success.volume"     // calls a provider needs in the interval to count in the success rates
	KeyOutlierSuccessMinHosts = "outlier.success.min.hosts"  // providers with that volume needed before any is judged
	// KeyOutlierGroup, on a provider's URL with `outlier` and the other
	// keys, puts it in a group of providers that one detector watches
	// with those settings: a mesh's cluster and its outlier_detection,
	// which its registry writes there. The reference's own `outlier`, when
	// set, watches all providers instead.
	KeyOutlierGroup = "outlier.group"
)

// Envoy's defaults.
const (
	DefaultOutlierConsecutive     = 5
	DefaultOutlierInterval        = 10000
	DefaultOutlierBaseEjection    = 30000
	DefaultOutlierMaxEjection     = 300000
	DefaultOutlierMaxPercent      = 10
	DefaultOutlierFailurePercent  = 85
	DefaultOutlierFailureVolume   = 50
	DefaultOutlierFailureMinHosts = 5
	// The success rate algorithm is off unless a stdev factor is set
	// (Envoy's is 1900, which a mesh cluster's outlier_detection brings).
	DefaultOutlierSuccessStdev    = 0
	DefaultOutlierSuccessVolume   = 100
	DefaultOutlierSuccessMinHosts = 5
)

type outlierSettings struct {
	consecutive      int64
	interval         time.Duration
	base, max        time.Duration
	maxPercent       int64
	failurePercent   int64
	volume, minHosts int64
	// The success rate algorithm: stdev factor in thousandths (0: off).
	successStdev, successVolume, successMinHosts int64
}

// outlier is one directory's detector. A call's outcome costs an atomic
// add (a failure) or a load (a success after another success); the lock is
// taken to eject, to let a provider back, and once per interval.
type outlier struct {
	s   outlierSettings
	log *slog.Logger
	now func() time.Time // a clock the tests move
	key string           // the reference's service key, for logs

	hosts    sync.Map     // kernel.Invoker -> *host
	out      atomic.Int32 // providers ejected now: 0 keeps List's path free
	nextEval atomic.Int64 // unix ns of the next interval's evaluation

	mu        sync.Mutex // ejections and evaluations
	ejections atomic.Int64
}

type host struct {
	consecutive   atomic.Int64
	calls, failed atomic.Int64 // this interval's
	isOut         atomic.Bool  // set and cleared under outlier.mu, read by List
	// Under outlier.mu:
	until time.Time // ejected until; zero when in
	times int64     // ejections, decayed by one per healthy interval
	why   string
}

// newOutlier reads the detector's keys from the reference's URL; nil when
// it is off. A value it cannot use is logged with the default taken.
func newOutlier(u *kernel.URL, log *slog.Logger) *outlier {
	if !u.ParamBool(KeyOutlier, false) {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	num := func(k string, def, lo, hi int64) int64 {
		s := u.Param(k)
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			log.Error("weft: outlier detection setting not usable; the default is used", "service", u.ServiceKey(),
				"key", k, "value", s, "want", fmt.Sprintf("a whole number in %d..%d", lo, hi), "default", def)
			return def
		}
		return n
	}
	ms := func(k string, def int64) time.Duration {
		return time.Duration(num(k, def, 1, 24*3600*1000)) * time.Millisecond
	}
	o := &outlier{log: log, now: time.Now, key: u.ServiceKey(), s: outlierSettings{
		consecutive:     num(KeyOutlierConsecutive, DefaultOutlierConsecutive, 0, 1<<30),
		interval:        ms(KeyOutlierInterval, DefaultOutlierInterval),
		base:            ms(KeyOutlierBaseEjection, DefaultOutlierBaseEjection),
		max:             ms(KeyOutlierMaxEjection, DefaultOutlierMaxEjection),
		maxPercent:      num(KeyOutlierMaxPercent, DefaultOutlierMaxPercent, 0, 100),
		failurePercent:  num(KeyOutlierFailurePercent, DefaultOutlierFailurePercent, 0, 100),
		volume:          num(KeyOutlierFailureVolume, DefaultOutlierFailureVolume, 1, 1<<30),
		minHosts:        num(KeyOutlierFailureMinHosts, DefaultOutlierFailureMinHosts, 1, 1<<30),
		successStdev:    num(KeyOutlierSuccessStdev, DefaultOutlierSuccessStdev, 0, 1<<30),
		successVolume:   num(KeyOutlierSuccessVolume, DefaultOutlierSuccessVolume, 1, 1<<30),
		successMinHosts: num(KeyOutlierSuccessMinHosts, DefaultOutlierSuccessMinHosts, 1, 1<<30),
	}}
	o.nextEval.Store(o.now().Add(o.s.interval).UnixNano())
	return o
}

func (o *outlier) host(iv kernel.Invoker) *host {
	if h, ok := o.hosts.Load(iv); ok {
		return h.(*host)
	}
	h, _ := o.hosts.LoadOrStore(iv, &host{})
	return h.(*host)
}

// observe counts a call's outcome; all is the directory's invoker list,
// which ejection and evaluation weigh against.
func (o *outlier) observe(iv kernel.Invoker, err error, all []kernel.Invoker) {
	if errors.Is(err, context.Canceled) {
		return // the caller gave up, or forking dropped the slower fork
	}
	h := o.host(iv)
	h.calls.Add(1)
	failed := err != nil && kernel.Retryable(err)
	if !failed {
		if h.consecutive.Load() != 0 {
			h.consecutive.Store(0)
		}
	} else {
		h.failed.Add(1)
		if n := h.consecutive.Add(1); o.s.consecutive > 0 && n >= o.s.consecutive {
			o.mu.Lock()
			if h.consecutive.Load() >= o.s.consecutive {
				o.eject(iv, h, all, fmt.Sprintf("%d failures in a row, the last: %s", n, cutErr(err)))
			}
			o.mu.Unlock()
		}
	}
	if now := o.now().UnixNano(); now >= o.nextEval.Load() {
		o.evaluate(all, now)
	}
}

func cutErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// eject takes h out unless it is out already or the share of providers out
// is at outlier.max.percent (at least one may always be). Under o.mu.
func (o *outlier) eject(iv kernel.Invoker, h *host, all []kernel.Invoker, why string) {
	now := o.now()
	h.consecutive.Store(0)
	if now.Before(h.until) {
		return
	}
	if limit := max(1, int64(len(all))*o.s.maxPercent/100); int64(o.out.Load()) >= limit {
		o.log.Warn("weft: outlier not ejected: outlier.max.percent of the providers are out already",
			"service", o.key, "provider", iv.URL().Address(), "why", why, "out", o.out.Load(), "limit", limit)
		return
	}
	h.times++
	d := min(time.Duration(h.times)*o.s.base, max(o.s.max, o.s.base))
	h.until, h.why = now.Add(d), why
	h.isOut.Store(true)
	o.out.Add(1)
	o.ejections.Add(1)
	o.log.Warn("weft: provider ejected: no calls go to it until it is back", "service", o.key,
		"provider", iv.URL().Address(), "for", d, "times", h.times, "why", why)
}

// evaluate runs once per interval: it ejects providers whose share of
// failed calls over the interval reached outlier.failure.percent (when
// enough providers had enough calls to judge), lets back those whose time
// is over, decays the ejection count of healthy ones, and forgets
// providers the directory no longer lists.
// successThreshold is Envoy's success rate algorithm (which gRPC's A50
// follows): over the listed providers with at least successVolume calls
// this interval, when there are successMinHosts of them, the mean success
// rate less successStdev/1000 population standard deviations; a provider
// below it is ejected. -1: not judged this interval.
func (o *outlier) successThreshold(listed map[kernel.Invoker]bool) float64 {
	if o.s.successStdev <= 0 {
		return -1
	}
	var rates []float64
	o.hosts.Range(func(k, v any) bool {
		h := v.(*host)
		if c := h.calls.Load(); listed[k.(kernel.Invoker)] && c >= o.s.successVolume {
			rates = append(rates, float64(c-h.failed.Load())/float64(c))
		}
		return true
	})
	if int64(len(rates)) < o.s.successMinHosts {
		return -1
	}
	var sum, sq float64
	for _, r := range rates {
		sum += r
	}
	mean := sum / float64(len(rates))
	for _, r := range rates {
		sq += (r - mean) * (r - mean)
	}
	return mean - math.Sqrt(sq/float64(len(rates)))*float64(o.s.successStdev)/1000
}

func (o *outlier) evaluate(all []kernel.Invoker, now int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now < o.nextEval.Load() {
		return // another caller evaluated this interval
	}
	o.nextEval.Store(now + int64(o.s.interval))
	listed := make(map[kernel.Invoker]bool, len(all))
	judged := int64(0)
	for _, iv := range all {
		listed[iv] = true
		if o.host(iv).calls.Load() >= o.s.volume {
			judged++
		}
	}
	threshold := o.successThreshold(listed)
	o.hosts.Range(func(k, v any) bool {
		iv, h := k.(kernel.Invoker), v.(*host)
		if !listed[iv] {
			if !h.until.IsZero() {
				o.out.Add(-1)
			}
			o.hosts.Delete(k)
			return true
		}
		o.letBack(iv, h, time.Unix(0, now))
		calls, failed := h.calls.Swap(0), h.failed.Swap(0)
		switch {
		case o.s.failurePercent > 0 && judged >= o.s.minHosts && calls >= o.s.volume && failed*100 >= o.s.failurePercent*calls && h.until.IsZero():
			o.eject(iv, h, all, fmt.Sprintf("%d of its %d calls in the last %v failed (outlier.failure.percent %d)", failed, calls, o.s.interval, o.s.failurePercent))
		case threshold >= 0 && calls >= o.s.successVolume && float64(calls-failed)/float64(calls) < threshold && h.until.IsZero():
			o.eject(iv, h, all, fmt.Sprintf("its success rate in the last %v, %.1f%% of %d calls, is below the providers' %.1f%% (the mean less outlier.success.stdev %d/1000 standard deviations)",
				o.s.interval, 100*float64(calls-failed)/float64(calls), calls, 100*threshold, o.s.successStdev))
		case h.until.IsZero() && h.times > 0 && failed == 0:
			h.times--
		}
		return true
	})
}

// letBack returns h if its ejection is over. Under o.mu.
func (o *outlier) letBack(iv kernel.Invoker, h *host, now time.Time) {
	if !h.until.IsZero() && !now.Before(h.until) {
		h.until, h.why = time.Time{}, ""
		h.isOut.Store(false)
		h.consecutive.Store(0)
		o.out.Add(-1)
		o.log.Info("weft: ejected provider is back", "service", o.key, "provider", iv.URL().Address())
	}
}

// in drops the ejected providers from list (which it never modifies),
// letting back those whose time is over.
func (o *outlier) in(list []kernel.Invoker) []kernel.Invoker {
	if o.out.Load() == 0 {
		return list
	}
	now := o.now()
	var kept []kernel.Invoker // nil until the first provider left out
	for i, iv := range list {
		switch {
		case !o.held(iv, now):
			if kept != nil {
				kept = append(kept, iv)
			}
		case kept == nil:
			kept = append(make([]kernel.Invoker, 0, len(list)), list[:i]...)
		}
	}
	if kept == nil {
		return list
	}
	return kept
}

// held reports whether iv is ejected at now, letting it back first if its
// time is over; the lock only for a provider that is out.
func (o *outlier) held(iv kernel.Invoker, now time.Time) bool {
	v, ok := o.hosts.Load(iv)
	if !ok || !v.(*host).isOut.Load() {
		return false
	}
	h := v.(*host)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.letBack(iv, h, now)
	return !h.until.IsZero()
}

// EjectionReporter is a directory whose outlier detection can say which
// providers it holds out (cluster's directories): QoS's ls shows them.
type EjectionReporter interface {
	Ejected(iv kernel.Invoker) (Ejection, bool)
	Ejections() (total, out int64)
}

var _ EjectionReporter = (*base)(nil)

// Ejection is a provider an outlier detector holds out: for QoS's ls.
type Ejection struct {
	Until time.Time
	Times int64
	Why   string
}

// ejected reports iv's ejection, if it is out.
func (o *outlier) ejected(iv kernel.Invoker) (Ejection, bool) {
	v, ok := o.hosts.Load(iv)
	if !ok {
		return Ejection{}, false
	}
	h := v.(*host)
	o.mu.Lock()
	defer o.mu.Unlock()
	if h.until.IsZero() || !o.now().Before(h.until) {
		return Ejection{}, false
	}
	return Ejection{Until: h.until, Times: h.times, Why: h.why}, true
}

var _ extension.OutcomeObserver = (*base)(nil)

// outlierGroups are a directory's detectors by group (KeyOutlierGroup), each
// with the providers it judges among.
type outlierGroups struct{ by map[string]*outlierGroup }

type outlierGroup struct {
	o       *outlier
	members []kernel.Invoker
}

// in is List's filter over every group: the providers their detectors
// hold out are left out.
func (g *outlierGroups) in(list []kernel.Invoker) []kernel.Invoker {
	out := false
	for _, grp := range g.by {
		if grp.o.out.Load() > 0 {
			out = true
			break
		}
	}
	if !out {
		return list
	}
	kept := make([]kernel.Invoker, 0, len(list))
	for _, iv := range list {
		// Each detector on its own clock, as its ejections were timed.
		if grp := g.by[iv.URL().Param(KeyOutlierGroup)]; grp == nil || !grp.o.held(iv, grp.o.now()) {
			kept = append(kept, iv)
		}
	}
	return kept
}

// regroup makes the directory's detectors those its providers' URLs ask
// for: a group whose settings did not change keeps its detector (and so
// its ejections), a new or changed one gets a new detector.
func (d *base) regroup(list []kernel.Invoker, log *slog.Logger) {
	var next *outlierGroups
	old := d.groups.Load()
	for _, iv := range list {
		u := iv.URL()
		name := u.Param(KeyOutlierGroup)
		if name == "" || !u.ParamBool(KeyOutlier, false) {
			continue
		}
		if next == nil {
			next = &outlierGroups{by: map[string]*outlierGroup{}}
		}
		grp := next.by[name]
		if grp == nil {
			o := newOutlier(u, log)
			if prev := old.get(name); prev != nil && prev.o.s == o.s {
				o = prev.o
			}
			grp = &outlierGroup{o: o}
			next.by[name] = grp
		}
		grp.members = append(grp.members, iv)
	}
	d.groups.Store(next)
}

func (g *outlierGroups) get(name string) *outlierGroup {
	if g == nil {
		return nil
	}
	return g.by[name]
}
