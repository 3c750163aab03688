// Package wasmfilter is weft's host of WASM filters: it runs filters written
// in any language that compiles to WebAssembly, sandboxed on wazero, behind
// the same extension.Filter interface as native ones. The contract with the
// guest is sdk/ABI.md (ABI v1); this package is its host side.
//
// # Why each piece is shaped as it is
//
// Engine. One wazero Runtime per filter, with the compiler engine (calls cost
// tens of nanoseconds instead of the interpreter's microseconds), a memory cap
// (WithMemoryLimitPages: the cap is a Runtime setting, hence a Runtime per
// filter) and WithCloseOnContextDone: compiled guest code is not preemptible
// by Go's scheduler, so without the termination checks this compiles into
// every loop back-edge a spinning guest would not only miss its deadline but
// could stall a GC stop-the-world and with it the whole process. The module
// is compiled once per version of the file. (What else that setting does per
// call, and why the host turns that part off, is under Limits.)
//
// Sandbox. The guest sees module "weft" (the ABI) and wazero's
// wasi_snapshot_preview1 with no preopened directory, no sockets, no
// arguments or environment, stdout/stderr discarded, real clocks and
// crypto/rand. Sleeping (poll_oneoff) returns at once: a guest blocked in a
// host function cannot be interrupted, so the host never blocks for it.
//
// Pool. wazero module instances are not safe for concurrent use, and a guest's
// globals must never be shared by two calls, so an instance serves one call at
// a time: taken from an idle stack (LIFO, so the warmest instance goes first),
// created when none is idle, returned afterwards. Creating one is kept off the
// calls' path where it can be: whenever a call takes the last idle instance,
// or a failure costs one and none is left idle, a spare is started in the
// background (one at a time), so the next call, and the one after a failure,
// rarely waits for a start-up. A call that finds none idle starts one and
// waits for it only until its own context is done; it then fails as a
// timeout at its deadline, and the instance joins the pool for a later call.
// When the module exports weft_on_response the instance is held across
// next.Invoke, so busy instances track calls in flight; without it the
// instance goes back as soon as weft_on_request returns, and busy instances
// track only guest code running (about GOMAXPROCS). Idle instances are kept up to MaxIdle (default
// 16 + 2×GOMAXPROCS): enough for a steady load without re-instantiating, while
// a burst's extra instances (each holding its linear memory) are closed when
// they come back. By default instances are not capped in number: the App's
// concurrency (the provider's `threads`, the consumer's callers) already
// bounds them. MaxInstances caps them for modules whose instances are
// expensive (a Go guest holds several MiB): every live instance counts, the
// spare and those starting too, so the cap is a bound on memory. A call that
// finds none idle and no room waits in a FIFO queue; an instance coming back
// goes straight to the first waiter, and room freed by a discard lets the
// first waiter start one under its own deadline. A waiter's wait ends with
// its context (the filter's timeout when it has no deadline, so no call
// waits without end behind stuck ones) and fails as CodeLimitExceeded,
// retryable, since another provider may have room.
//
// Limits. Every guest call runs under the invocation's deadline; when the
// invocation has none, under the filter's timeout. wazero's own way to enforce
// that (WithCloseOnContextDone) starts a goroutine and a channel for every
// guest call, whatever the context, even one that can never be done: about
// 0.65µs and 3 allocations, most of a no-op filter's cost. So once a version's
// first instance has started, the host turns that per-call watch off for the
// compiled module, an unexported wazero field reached by reflection with the
// name and type of every step checked (internals.go), and bounds each call
// itself: a per-instance timer, reset to the time left before the call's
// deadline or to the filter's timeout, marks the module closed when it fires,
// and the checks compiled into the guest's loops (they stay: they are compiled
// in) fail the call at the next back-edge, as late as the timer itself. The
// timer decides: a guest that returned as it fired still costs the call and
// the instance. The module is only marked from the timer's goroutine (its
// Closed word set, as wazero's watch does), not closed: closing it there would
// close its resources under a WASI function the guest may be running, a race
// wazero fixed for its own watch; it is closed for real once the call has
// returned. The call's context is not watched: a deadline's Done channel is
// never asked for (kernel.WithDeadline, the provider's context, makes one and
// a timer only on demand), so a call with a deadline that is cancelled earlier
// stops its guest at the deadline at the latest, and none of its later
// callbacks runs (each checks the context first); a cancellable call without
// deadline is watched through context.AfterFunc (rare, two allocations), so
// cancelling it stops its guest at once. A call whose context is done before a
// callback fails without running it and leaves the instance healthy. The fast
// path is not taken, and wazero's watch stays on with the call's context
// handed to it, as before (the same bounds, at its cost), when the wazero in
// use does not pass the layout checks or a self-test run once per process
// (logged once per filter at warn; the test suite fails on the pinned
// version), or for a module with a start section: wazero runs a start function
// inside its instantiation, before the host has an instance it could mark. A
// new instance's start-up (the module's start function, which wazero runs
// while instantiating, _initialize and weft_abi_version) runs under its own
// limit, InitTimeout (5s, or the filter's timeout if longer), counted from its
// start: it is not charged to the call that needed the instance, whose budget
// starts with its first callback, so a slow start on a loaded machine does not
// fail a healthy call, and a runaway _initialize is still stopped (the host
// marks the module closed when the limit passes or Close cancels start-ups,
// whether wazero's watch is on or not). A trap, a timeout, memory exhaustion, a WASI proc_exit or an ABI
// violation fails that call with a *kernel.Error naming the filter and the
// cause (CodeTimeout for time, else CodeUnknown), and the instance is closed,
// never reused: its memory may be half-written. The next call gets a fresh
// one. The warnings these failures log are rate-limited per filter and kind
// (WarnInterval): a broken guest fails every call, and a line per call would
// bury everything else. Statuses are not failures: a host function that
// answers BAD_ARGUMENT has done nothing, and the guest decides what to do
// about it.
//
// Reload. A poller stats the module file every Interval (500ms in an App):
// polling is chosen over fsnotify because the usual deploy is "write a temp
// file and rename it over", which replaces the inode a file watch is attached
// to, and a stat every half second per filter costs nothing. A changed file
// is compiled and checked (exports, imports, abi version) off the call path;
// if it is good it becomes current atomically. Calls in flight finish on the
// old version's instances, which are closed as they come back, and the old
// compiled code is released with its last instance. A broken file is logged
// and the old version keeps serving; the same broken file is not retried until
// it changes again.
//
// Counters. counter_add uses one Counters store per App (never a global: two
// Apps in a process share nothing), sharded, with fixed windows aligned on
// multiples of the window, expired windows swept lazily and the number of
// keys capped, so memory stays bounded whatever keys a guest invents.
//
// Hot path. A call with a no-op guest costs an atomic load, a pool pop and
// push under an uncontended mutex, a timer Reset and Stop, and one
// CallWithStack on a per-instance stack: no allocation and no goroutine
// (about 0.2µs, against 0.8µs with wazero's watch). Host functions find their
// instance through a sync.Map keyed by the calling module (read-mostly,
// lock-free), read keys from guest memory without copying, and compute the
// arguments' JSON only when asked.
package wasmfilter
