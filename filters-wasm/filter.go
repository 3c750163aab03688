package wasmfilter

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Defaults of Config.
const (
	DefaultMaxMemoryPages = 512
	DefaultTimeout        = time.Second
	DefaultInitTimeout    = 5 * time.Second
	DefaultWarnInterval   = 30 * time.Second
)

// Config describes one WASM filter.
type Config struct {
	// Name is the filter's extension name, used in errors and logs.
	Name string
	// Service makes the module a service's implementation (a service's
	// impl.wasm): it must export weft_on_call, which Serve runs, and
	// need not export weft_on_request.
	Service bool
	// Path is the module file. It is read at New and, when watched, again
	// whenever it changes.
	Path string
	// Module, when not nil, is the module itself and Path is only its name in
	// messages (nothing is read or watched).
	Module []byte
	// SHA256, when set, pins the module: the hex SHA-256 its bytes must
	// have, at New and at every reload (a file that changed to other bytes
	// is refused, and the current module keeps serving).
	SHA256 string
	// MaxMemoryPages caps each instance's linear memory, in 64 KiB pages
	// (default 512 = 32 MiB).
	MaxMemoryPages uint32
	// Timeout bounds each guest call of an invocation whose context has no
	// deadline (default 1s).
	Timeout time.Duration
	// InitTimeout bounds a new instance's start-up, its _initialize and
	// weft_abi_version (default DefaultInitTimeout, or Timeout if longer). It
	// is not charged to the call that needed the instance: that call's
	// guest calls have their own bound, and it waits for the start-up only
	// until its own deadline.
	InitTimeout time.Duration
	// Settings is the filter's own configuration, returned to the guest by
	// get_config as a JSON object.
	Settings map[string]any
	// MaxIdle bounds the idle instances kept for reuse (default
	// 16 + 2×GOMAXPROCS).
	MaxIdle int
	// MaxInstances caps the instances of a module version, idle, busy and
	// starting alike (the spare the pool keeps counts). When all are busy a
	// call waits for one until its deadline, or for the filter's Timeout when
	// it has none, then fails with CodeLimitExceeded. 0 (the default) sets
	// no cap: instances are made as concurrent calls need them, bounded only
	// by the App's own concurrency (the provider's threads, the consumer's
	// callers). During a reload the old version's busy instances finish their
	// calls outside the new version's count.
	MaxInstances int
	// WarnInterval rate-limits the host's warnings (traps, timeouts,
	// max_instances reached, failed start-ups): at most one line per kind per
	// interval, the next line saying how many were suppressed (default
	// DefaultWarnInterval). Failures are rarely alone: a broken guest or an
	// overloaded pool fails every call, and one line per call would flood
	// the log.
	WarnInterval time.Duration
	// Log receives guest logs and the host's warnings (default: discarded).
	Log *slog.Logger
	// Counters is the store of counter_add, shared by the filters of an App
	// (default: a store of this filter's own).
	Counters *Counters
	// Shared is the store of proxy-wasm's shared data, shared by the filters
	// of an App (default: a store of this filter's own).
	Shared *SharedData
	// ABI is the guest's: ABIWeft (sdk/ABI.md, the default) or ABIProxyWasm
	// (proxy-wasm 0.2.1, 0.2.0 or 0.1.0).
	ABI string
	// FailOpen lets a call through when the guest fails it (a trap, a
	// timeout, its memory cap, an ABI violation) instead of failing the call:
	// Istio's failStrategy FAIL_OPEN. Default: fail closed.
	FailOpen bool
	// The plugin settings of a proxy-wasm filter, in Envoy's words:
	// RootID (plugin_root_id, which root context of the module serves the
	// filter), VMID (filters with one vm_id share shared data and queues;
	// NewVM makes those with one module share instances too),
	// Configuration (handed to proxy_on_configure) and VMConfiguration (to
	// proxy_on_vm_start).
	RootID, VMID                   string
	Configuration, VMConfiguration []byte
	// Clusters name the upstreams of proxy_http_call (and, for a weft-ABI
	// filter, of http_call): name -> base URL (http:// or https://) or
	// ref:<reference id>. MaxCallouts bounds the callouts in flight
	// (default DefaultMaxCallouts).
	Clusters    map[string]string
	MaxCallouts int
	// Body lists the bodies the filter gets: BodyRequest, BodyResponse.
	Body []string
	// AllowedCapabilities lists the proxy-wasm host functions and
	// callbacks the filter may use (Envoy's allowed_capabilities); empty:
	// all. A host function not listed answers INTERNAL_FAILURE (logged); a
	// callback not listed is never called. For a weft-ABI filter it lists
	// the v1.1 host functions it may call (v1's are always allowed); one
	// not listed answers REFUSED (logged).
	AllowedCapabilities []string
}

// Filter is a WASM module acting as an extension.Filter. It is safe for
// concurrent use; Close releases it.
type Filter struct {
	name         string
	service      bool // a service's module (Serve), not a filter's
	path         string
	timeout      time.Duration
	initTimeout  time.Duration
	maxPages     uint32
	maxIdle      int
	maxInstances int
	log          *slog.Logger
	warns        warnLimiter
	counters     *Counters
	failOpen     bool
	shared       *SharedData
	vmID         string       // the space of the filter's shared data and queues
	metrics      guestMetrics // defined by the guest (proxy_define_metric, metric_define); the host's serve its VM

	// A VM (vm.go): the runtime, module versions and instance pool belong
	// to host, which is the filter itself unless it shares the instances
	// of other proxy-wasm filters with its vm_id (NewVM). members are the
	// host's filters, each with its root context rootCtx (its index + 1)
	// in every instance; open counts those not closed, and the last to
	// close closes the VM (vmClosed).
	host     *Filter
	members  []*Filter
	rootCtx  uint32
	open     atomic.Int32
	vmClosed atomic.Bool

	// The proxy-wasm ticker (pw_tick.go): its period (0: none), started
	// once, stopped by Close.
	tickPeriod atomic.Int64
	tickOnce   sync.Once
	tickStop   chan struct{}
	tickWG     sync.WaitGroup
	bgStopped  bool // under queueMu: stopTicks ran, no loop starts
	// The shared-queue worker (pw_queue.go), stopped with the ticker.
	queueOnce    sync.Once
	queueCh      chan uint32
	queueMu      sync.Mutex
	queuePending map[uint32]bool

	crash crashes // crash-loop back-off (backoff.go)

	// weft is a weft-ABI filter's v1.1 capability settings: clusters,
	// max_callouts, allowed_capabilities (caps_weft_callout.go).
	weft weftCaps

	// Callouts (pw_callout.go): in flight, and their client.
	callouts   atomic.Int64
	httpClient *http.Client
	grpcOnce   sync.Once
	grpcHTTP   *http.Client                             // gRPC callouts' HTTP/2 client, made at the first (pw_grpc.go)
	refs       atomic.Pointer[References]               // the App's references, for ref: clusters
	sers       atomic.Pointer[extension.Serializations] // the App's, for bodies (pw_body.go)
	pw         *pwConfig                                // nil: weft's ABI
	config     []byte                                   // get_config's JSON for versions loaded from now on; under mu
	data       []byte                                   // the current module's bytes, for SetConfig; under mu

	rt      wazero.Runtime
	wasi    map[string]api.FunctionDefinition
	modCfg  wazero.ModuleConfig
	byMod   sync.Map // api.Module -> *instance: host functions find their caller
	cur     atomic.Pointer[version]
	seq     int
	mu      sync.Mutex // serialises reloads and Close
	closed  atomic.Bool
	watchMu sync.Mutex
	// slowOnce: the fast path's unavailability is logged once per filter.
	slowOnce sync.Once
	bg       sync.WaitGroup // instances being made off a call's path; Close waits for them
	// starting bounds the guest code of instance start-ups; Close cancels it
	// so that they stop (wazero, or on the fast path the host, stops guest
	// code when its context is done) before the runtime closes: closing it
	// under running guest code is a race.
	starting     context.Context
	stopStarting context.CancelFunc
	stop         chan struct{}
	done         chan struct{}
	tried        fileStamp // the file last compiled (good or bad); under mu
	digest       []byte    // Config.SHA256 decoded; nil: not pinned
	inMem        bool      // made from Config.Module: nothing to read or watch

	stats struct {
		created, discarded, failures, reloads, failedReloads atomic.Int64
		// calls, traps, timeouts and memBytes feed the App's metrics:
		// failures split into traps and timeouts, and the linear memory
		// of the live instances, updated as instances start, come back
		// from a call and close.
		calls, traps, timeouts, memBytes atomic.Int64
		failOpen                         atomic.Int64 // calls let through a failed guest (fail_open)
		startFailures, backoffs          atomic.Int64 // instances that failed to start; crash-loop back-offs begun (backoff.go)
		maxBusy                          atomic.Int32
	}
}

// New compiles and checks the module (its exports, its imports and, in one
// instance, weft_abi_version) and returns the filter. The error says what is
// wrong with the module.
func New(ctx context.Context, c Config) (*Filter, error) {
	f, err := prepare(c)
	if err != nil {
		return nil, err
	}
	data := c.Module
	f.inMem = data != nil
	if data == nil {
		st, b, err := readStamped(c.Path)
		if err != nil {
			return nil, err
		}
		data, f.tried = b, st
	}
	if err := f.startVM(ctx, []*Filter{f}, data); err != nil {
		return nil, err
	}
	return f, nil
}

// prepare checks c and makes its filter, with no runtime yet (startVM
// gives it one, or joins it to a host's).
func prepare(c Config) (*Filter, error) {
	if c.Name == "" {
		return nil, errors.New("wasmfilter: a filter needs a name")
	}
	f := &Filter{name: c.Name, service: c.Service, path: c.Path, timeout: c.Timeout, initTimeout: c.InitTimeout, maxPages: c.MaxMemoryPages,
		maxIdle: c.MaxIdle, maxInstances: c.MaxInstances, log: c.Log, counters: c.Counters, failOpen: c.FailOpen, vmID: c.VMID,
		tickStop: make(chan struct{})}
	switch c.ABI {
	case "", ABIWeft:
		if err := f.initWeftCaps(c); err != nil {
			return nil, err
		}
	case ABIProxyWasm:
		f.pw = &pwConfig{rootID: c.RootID, config: c.Configuration, vmConfig: c.VMConfiguration,
			clusters: c.Clusters, maxCallouts: c.MaxCallouts,
			reqBody: slices.Contains(c.Body, BodyRequest), respBody: slices.Contains(c.Body, BodyResponse)}
		if len(c.AllowedCapabilities) > 0 {
			f.pw.allowed = map[string]bool{}
			for _, name := range c.AllowedCapabilities {
				if _, host := pwHostSignatures[name]; !host && pwCallbacks[name].params == nil && pwVersionMarkers[name] == "" {
					return nil, fmt.Errorf("allowed_capabilities: %q is neither a proxy-wasm host function nor a callback weft knows (e.g. proxy_log, proxy_http_call, proxy_on_request_headers)", name)
				}
				f.pw.allowed[name] = true
			}
		}
		if f.pw.maxCallouts <= 0 {
			f.pw.maxCallouts = DefaultMaxCallouts
		}
		f.httpClient = newCalloutClient()
	default:
		return nil, fmt.Errorf("abi %q is not known: want %s (weft's ABI, sdk/ABI.md; the default) or %s (proxy-wasm 0.2.1, 0.2.0 or 0.1.0)", c.ABI, ABIWeft, ABIProxyWasm)
	}
	f.warns.every = c.WarnInterval
	if f.warns.every <= 0 {
		f.warns.every = DefaultWarnInterval
	}
	if f.maxInstances < 0 {
		return nil, fmt.Errorf("max_instances %d is negative: want 0 (no cap) or the most instances of the module", f.maxInstances)
	}
	if f.timeout <= 0 {
		f.timeout = DefaultTimeout
	}
	if f.initTimeout <= 0 {
		f.initTimeout = max(DefaultInitTimeout, f.timeout)
	}
	if f.maxPages == 0 {
		f.maxPages = DefaultMaxMemoryPages
	}
	if f.maxPages > 65536 {
		return nil, fmt.Errorf("max_memory_pages %d is over wasm32's 65536 (4 GiB)", f.maxPages)
	}
	if f.maxIdle <= 0 {
		f.maxIdle = 16 + 2*runtime.GOMAXPROCS(0)
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.log = f.log.With("filter", f.name)
	if f.counters == nil {
		f.counters = NewCounters()
	}
	if f.shared = c.Shared; f.shared == nil {
		f.shared = NewSharedData()
	}
	js, err := settingsJSON(c.Settings)
	if err != nil {
		return nil, err
	}
	f.config = js
	if c.SHA256 != "" {
		if f.digest, err = parseDigest(c.SHA256); err != nil {
			return nil, fmt.Errorf("sha256: %w", err)
		}
	}
	f.host, f.rootCtx = f, 1
	return f, nil
}

// startVM makes f the host of members (f first): their runtime, and the
// first version of the module data with one instance started, a root
// context for each member in it.
func (f *Filter) startVM(ctx context.Context, members []*Filter, data []byte) error {
	for i, m := range members {
		m.host, m.rootCtx = f, uint32(i+1)
	}
	f.members = members
	f.open.Store(int32(len(members)))
	f.starting, f.stopStarting = context.WithCancel(context.Background())
	var err error
	f.rt = newRuntime(ctx, f.maxPages)
	if f.wasi, err = instantiateHost(ctx, f.rt, f); err != nil {
		f.stopStarting()
		f.rt.Close(ctx)
		return err
	}
	f.modCfg = sandboxConfig()
	v, err := f.load(ctx, data)
	if err != nil {
		f.stopStarting()
		f.bg.Wait()
		f.rt.Close(ctx)
		return err
	}
	f.cur.Store(v)
	return nil
}

// newRuntime makes the Runtime of one filter; see the package doc for each
// setting. WithCloseOnContextDone must stay: the fast path (internals.go)
// turns off only its per-call watch, and relies on the checks it compiles
// into every loop.
func newRuntime(ctx context.Context, maxPages uint32) wazero.Runtime {
	// Debug info off: with it, wazero builds a DWARF-annotated stack trace
	// on every trap — 30 ms for a guest shipped unstripped (Debian's Rust
	// std adds 1.7 MB of it), long enough to turn a trap into a timeout.
	// Logged traces keep function names, not source lines.
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithDebugInfoEnabled(false).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(maxPages))
}

// sandboxConfig is how every instance is made: anonymous (so a module can be
// instantiated many times), no file system or network (wazero gives none
// unless asked), output discarded, real clocks and randomness, and no start
// function (_initialize is run by hand, under a deadline).
func sandboxConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdout(io.Discard).WithStderr(io.Discard).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
}

// instantiateHost instantiates the modules a guest may import into rt: WASI
// and the ABI's "weft" (bound to f) and returns the WASI
// functions, which the static check compares imports against.
func instantiateHost(ctx context.Context, rt wazero.Runtime, f *Filter) (map[string]api.FunctionDefinition, error) {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("wasmfilter: instantiate WASI: %w", err)
	}
	if f != nil && f.pw != nil {
		if _, err := pwHostModule(rt, f).Instantiate(ctx); err != nil {
			return nil, fmt.Errorf("wasmfilter: instantiate the proxy-wasm host module: %w", err)
		}
		if _, err := wasiUnstableModule(rt).Instantiate(ctx); err != nil {
			return nil, fmt.Errorf("wasmfilter: instantiate %s: %w", wasiUnstable, err)
		}
	} else if _, err := hostModule(rt, f).Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("wasmfilter: instantiate host module: %w", err)
	}
	return rt.Module(WASIModule).ExportedFunctionDefinitions(), nil
}

// load compiles and checks a module and makes a version of it with one
// instance ready in its pool.
func (f *Filter) load(ctx context.Context, data []byte) (*version, error) {
	if err := f.checkDigest(data); err != nil {
		return nil, err
	}
	cm, err := f.rt.CompileModule(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("module %s does not compile: %w", f.path, err)
	}
	if f.pw != nil {
		if _, _, problems := pwStaticReport(cm, f.wasi); len(problems) > 0 {
			cm.Close(ctx)
			return nil, fmt.Errorf("module %s is not a proxy-wasm module weft can run (run `weft wasm check %s`): %s",
				f.path, f.path, strings.Join(problems, "; "))
		}
	} else if v := pwVersion(cm); v != "" {
		cm.Close(ctx)
		return nil, fmt.Errorf("module %s is a proxy-wasm module (it exports proxy_abi_version_%s), not one of weft's ABI: configure it with abi: proxy-wasm",
			f.path, strings.ReplaceAll(v, ".", "_"))
	} else if _, _, problems := staticReport(cm, f.wasi); len(problems) > 0 {
		cm.Close(ctx)
		return nil, fmt.Errorf("module %s does not follow weft's WASM ABI v1 (run `weft wasm check %s`): %s",
			f.path, f.path, strings.Join(problems, "; "))
	} else if err := f.roleExports(cm); err != nil {
		cm.Close(ctx)
		return nil, err
	}
	v := &version{f: f, cm: cm, seq: f.seq + 1, config: f.config, live: 1, creating: 1, pwABI: pwVersion(cm)}
	in, err := v.create()
	if err != nil {
		v.retire()
		return nil, fmt.Errorf("module %s: %w", f.path, err)
	}
	f.fastPath(v, in, data)
	v.put(in)
	f.seq++
	f.data = data
	return v, nil
}

// forceWatch keeps wazero's per-call watch on for every module (tests of the
// fallback set it).
var forceWatch bool

// fastPath decides whether v's guest calls take the fast path: wazero's
// per-call watch turned off for its compiled module, each call bounded by
// the instance's own timer instead (see internals.go and instance.call). in
// is v's first instance, started with the watch still on; no other exists
// yet, and none runs a call, so the flag can be written. A module with a
// start section keeps the watch: wazero runs a start function inside
// InstantiateModule, where nothing else could stop it.
func (f *Filter) fastPath(v *version, in *instance, data []byte) {
	var err error
	switch {
	case forceWatch:
		v.slow = "turned off for a test"
	case hasStartSection(data):
		v.slow = "the module has a start section"
		f.log.Info("weft: wasm filter keeps wazero's per-call watch: the module has a start section, which wazero runs before the host could stop it (calls cost about 0.6µs more; bounds are the same)",
			"module_version", v.seq)
	default:
		if err = fastPathError(); err == nil {
			if _, err = closedWord(in.mod); err == nil {
				err = disableCallWatch(in.alloc)
			}
		}
		if err != nil {
			v.slow = err.Error()
			f.slowOnce.Do(func() {
				f.log.Warn("weft: wasm filter keeps wazero's per-call watch: the fast call path is unavailable with this wazero version (calls cost about 0.6µs and 3 allocations more; bounds are the same)",
					"error", v.slow)
			})
		}
	}
	v.fast = v.slow == ""
	in.fast = v.fast
}

func settingsJSON(settings map[string]any) ([]byte, error) {
	if settings == nil {
		settings = map[string]any{}
	}
	js, err := json.Marshal(view.Generic(settings))
	if err != nil {
		return nil, fmt.Errorf("config: not representable as JSON: %w", err)
	}
	return js, nil
}

// SetConfig replaces the filter's own configuration (what get_config
// returns). Guests may read it once, in _initialize or on their first call,
// so it takes effect through new instances: the current module is loaded
// again with the new config, calls in flight finish on the old instances,
// new calls get the new ones. On error the filter keeps its config.
func (f *Filter) SetConfig(ctx context.Context, settings map[string]any) error {
	f = f.host
	js, err := settingsJSON(settings)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vmClosed.Load() {
		return errors.New("wasmfilter: filter closed")
	}
	old := f.config
	f.config = js
	v, err := f.load(ctx, f.data)
	if err != nil {
		f.config = old
		return err
	}
	f.cur.Swap(v).retire()
	return nil
}

// Name returns the filter's name.
func (f *Filter) Name() string { return f.name }

// Reload reads the module file again and, if it compiles and passes the ABI
// check, makes it current: calls in flight finish on the old instances, new
// calls get the new module. On error the current module stays.
func (f *Filter) Reload(ctx context.Context) error {
	f = f.host
	st, data, err := readStamped(f.path)
	if err != nil {
		return err
	}
	return f.reload(ctx, st, data)
}

func (f *Filter) reload(ctx context.Context, st fileStamp, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vmClosed.Load() {
		return errors.New("wasmfilter: filter closed")
	}
	f.tried = st
	v, err := f.load(ctx, data)
	if err != nil {
		f.stats.failedReloads.Add(1)
		return err
	}
	old := f.cur.Swap(v)
	old.retire()
	f.stats.reloads.Add(1)
	return nil
}

// Close stops the filter's ticks and callouts and, when it is the last
// open filter of its VM, stops watching, closes every instance and
// releases the compiled code. Calls still running fail. Close is
// idempotent.
func (f *Filter) Close() error {
	f.stopTicks()
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	f.grpcOnce.Do(func() {}) // none made after Close
	if f.grpcHTTP != nil {
		f.grpcHTTP.CloseIdleConnections()
	}
	if f.httpClient != nil {
		f.httpClient.CloseIdleConnections()
	}
	if f.host.open.Add(-1) > 0 {
		return nil
	}
	return f.host.closeVM()
}

// closeVM closes the host's runtime, its last member closed.
func (f *Filter) closeVM() error {
	f.stopWatching()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vmClosed.Store(true)
	if v := f.cur.Load(); v != nil {
		v.retire()
	}
	// Instances being started in the background stop first (their guest
	// code sees its context end); then nothing runs in the runtime but
	// calls, which the App has drained before it closes its plugins.
	f.stopStarting()
	f.bg.Wait()
	return f.rt.Close(context.Background())
}

// Stats are a filter's counts since New. The filters of one VM (vm.go)
// share its instances: Version, Live, Idle, Waiting, Created, Discarded,
// Reloads, FailedReloads and MemoryBytes are the VM's, the same for each
// (sum them once per VM), and GuestMetrics are the host's (the VM's first
// filter) alone; the rest are the filter's own.
type Stats struct {
	// Version counts the module versions loaded (1 + successful reloads).
	Version int
	// Live instances (idle and busy) of the current version; Idle of those.
	// Instances still starting are in neither.
	Live, Idle int
	// Created and Discarded count instances over the filter's life;
	// Discarded includes those closed after a failure and the idle surplus.
	Created, Discarded int64
	// Failures counts guest calls that failed (trap, timeout, memory, ABI
	// violation), each costing its instance.
	Failures      int64
	Reloads       int64
	FailedReloads int64
	// MaxBusy is the largest number of calls ever seen on one instance at
	// once: 1 unless the pool is broken.
	MaxBusy int32
	// Waiting counts the calls waiting for an instance of the current
	// version now (MaxInstances reached).
	Waiting int
	// Calls counts the calls the filter was asked to run; Traps and
	// Timeouts split Failures (a cancelled call counts as a timeout).
	Calls, Traps, Timeouts int64
	// MemoryBytes is the linear memory of the live instances, as of their
	// last call.
	MemoryBytes int64
	// FailOpen counts the calls let through a failed guest (fail_open).
	FailOpen int64
	// StartFailures counts the instances that failed to start (a trap in
	// start-up, a refused configuration, the start-up limit); Backoffs the
	// crash-loop back-offs those began (backoff.go). The VM's.
	StartFailures, Backoffs int64
	// GuestMetrics are the metrics a proxy-wasm guest defined, in the order
	// it defined them.
	GuestMetrics []GuestMetric
}

// Stats returns the filter's counts.
func (f *Filter) Stats() Stats {
	h := f.host // the VM's counts: its instances serve every member
	s := Stats{Created: h.stats.created.Load(), Discarded: h.stats.discarded.Load(), Failures: f.stats.failures.Load(),
		Reloads: h.stats.reloads.Load(), FailedReloads: h.stats.failedReloads.Load(), MaxBusy: f.stats.maxBusy.Load(),
		Calls: f.stats.calls.Load(), Traps: f.stats.traps.Load(), Timeouts: f.stats.timeouts.Load(), MemoryBytes: h.stats.memBytes.Load(),
		FailOpen: f.stats.failOpen.Load(), StartFailures: h.stats.startFailures.Load(), Backoffs: h.stats.backoffs.Load()}
	if h == f {
		s.GuestMetrics = f.metrics.snapshot()
	}
	if v := h.cur.Load(); v != nil {
		v.mu.Lock()
		s.Version, s.Live, s.Idle, s.Waiting = v.seq, v.live-v.creating, len(v.idle), len(v.waiters)
		v.mu.Unlock()
	}
	return s
}

// Invoke runs weft_on_request, the rest of the chain, then weft_on_response
// (when exported) on the same instance; a proxy-wasm filter runs its
// callbacks instead (invokeProxy).
func (f *Filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	if f.pw != nil {
		return f.invokeProxy(ctx, next, inv)
	}
	v, in, err := f.acquire(ctx, exportOnRequest)
	if err != nil {
		if be, ok := err.(*backoffErr); ok {
			return f.failedOpen(ctx, be.err, next, inv, nil)
		}
		return kernel.Result{}, err
	}
	in.begin(next, inv)
	if dl, ok := ctx.Deadline(); ok {
		in.deadline = dl.UnixMilli() // get_deadline
	}
	wc := f.weftTrack(in, ctx) // nil unless the filter may call out (http_call)
	if wc != nil {
		defer f.weftUntrack(in, wc)
	}
	act, err := in.call(ctx, in.onRequest, exportOnRequest)
	if err != nil {
		in.end()
		if nr, ok := err.(*notRun); ok {
			v.put(in)
			return kernel.Result{}, f.ctxError(nr.err, "before "+exportOnRequest+" ran")
		}
		v.discard(in)
		return f.failedOpen(ctx, err, next, inv, nil)
	}
	if act != actionContinue {
		err := in.rejection(act, exportOnRequest)
		in.end()
		v.put(in)
		return kernel.Result{}, err
	}
	if in.onResponse == nil {
		in.end()
		v.put(in)
		return next.Invoke(ctx, inv)
	}
	res, callErr := next.Invoke(ctx, inv)
	in.respond(res, callErr)
	wc.rebound()
	act, err = in.call(ctx, in.onResponse, exportOnResponse)
	if err != nil {
		in.end()
		if _, ok := err.(*notRun); ok {
			// No time is left to run the guest: the call's own outcome
			// (most likely its timeout) is the answer.
			v.put(in)
			return res, callErr
		}
		v.discard(in)
		return f.failedOpen(ctx, err, next, inv, func() (kernel.Result, error) { return res, callErr })
	}
	if act != actionContinue {
		err := in.rejection(act, exportOnResponse)
		in.end()
		v.put(in)
		return kernel.Result{}, err
	}
	res = in.res
	in.end()
	v.put(in)
	return res, callErr
}

// acquire takes an instance of the current version for a call; first is
// the callback it will run first, for the errors.
func (f *Filter) acquire(ctx context.Context, first string) (*version, *instance, error) {
	f.stats.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, nil, f.ctxError(err, "before "+first+" ran")
	}
	if f.closed.Load() {
		return nil, nil, kernel.Errorf(kernel.CodeUnknown, "wasm filter %q is closed (its App is stopping)", f.name)
	}
	h := f.host
	v := h.cur.Load()
	in, err := v.get(ctx)
	for err == errRetired && !h.vmClosed.Load() {
		v = h.cur.Load()
		in, err = v.get(ctx)
	}
	if err == errRetired {
		return nil, nil, kernel.Errorf(kernel.CodeUnknown, "wasm filter %q is closed (its App is stopping)", f.name)
	}
	if full, ok := err.(*errFull); ok { // a type assertion: errors.As would move full to the heap on every call
		return nil, nil, f.fullError(ctx, full.waited)
	}
	if err == errStarting {
		return nil, nil, f.ctxError(ctx.Err(), "while a new instance was starting (none was idle); that instance will serve a later call")
	}
	if _, ok := err.(*backoffErr); ok {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, kernel.Wrap(kernel.CodeUnknown, err, "wasm filter %q: no instance to run the call", f.name)
	}
	in.f = f // the member whose callbacks run (vm.go)
	return v, in, nil
}

// failedOpen is the outcome of a call whose guest failed (err, the instance
// discarded): err, or with fail_open the call as if the filter were not
// there: the rest of the chain (in the request's callback), or the answer
// the chain gave (answered, in the response's).
func (f *Filter) failedOpen(ctx context.Context, err error, next kernel.Invoker, inv *kernel.Invocation, answered func() (kernel.Result, error)) (kernel.Result, error) {
	if !f.failOpen || ctx.Err() != nil || f.closed.Load() {
		return kernel.Result{}, err
	}
	f.stats.failOpen.Add(1)
	f.warn(warnFailOpen, "weft: wasm filter failed; fail_open lets the call through without it", "error", err.Error())
	if answered != nil {
		return answered()
	}
	return next.Invoke(ctx, inv)
}

// fullError is the error of a call that waited for an instance while
// max_instances were busy, until its context or the filter's timeout ended
// the wait. It says how to fix it, and is logged (rate-limited): a pool too
// small for the load fails calls in bursts.
func (f *Filter) fullError(ctx context.Context, waited time.Duration) error {
	waited = waited.Round(time.Millisecond)
	key := "wasm.filters." + f.name
	var ke *kernel.Error
	switch err := ctx.Err(); {
	case errors.Is(err, context.Canceled):
		ke = kernel.Wrap(kernel.CodeUnknown, err, "wasm filter %q: the call was cancelled after waiting %v for an instance (max_instances %d reached, every instance busy)",
			f.name, waited, f.maxInstances)
	case err != nil:
		ke = kernel.Wrap(kernel.CodeLimitExceeded, err, "wasm filter %q: max_instances %d reached: every instance was busy until the call's deadline (waited %v); raise %s.max_instances (0: no cap) or the call's timeout",
			f.name, f.maxInstances, waited, key)
	default:
		ke = kernel.Errorf(kernel.CodeLimitExceeded, "wasm filter %q: max_instances %d reached: every instance was busy for the filter's timeout of %v, the longest a call without deadline waits; raise %s.max_instances (0: no cap) or %s.timeout",
			f.name, f.maxInstances, f.timeout, key, key)
	}
	f.warn(warnFull, "weft: wasm filter has every instance busy (max_instances reached); a call waited and failed", "error", ke.Msg)
	return ke
}

// ctxError is the error of a call whose context was done when (when says) it
// was to run a guest.
func (f *Filter) ctxError(err error, when string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return kernel.Wrap(kernel.CodeTimeout, err, "wasm filter %q: the call's deadline passed %s", f.name, when)
	}
	return kernel.Wrap(kernel.CodeUnknown, err, "wasm filter %q: the call was cancelled %s", f.name, when)
}

type fileStamp struct {
	fi      os.FileInfo
	size    int64
	modTime time.Time
}

func (a fileStamp) same(b fileStamp) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) && a.size == b.size && a.modTime.Equal(b.modTime)
}

func stat(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileStamp{}, fmt.Errorf("%s is not a regular file", path)
	}
	return fileStamp{fi: fi, size: fi.Size(), modTime: fi.ModTime()}, nil
}

// readStamped reads a file and the stamp it had: the stamp is taken before
// the read, so a write racing with the read shows up as a change at the next
// poll and is read again.
func readStamped(path string) (fileStamp, []byte, error) {
	st, err := stat(path)
	if err != nil {
		return fileStamp{}, nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fileStamp{}, nil, err
	}
	return st, b, nil
}
