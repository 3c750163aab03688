package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"os"
	"reflect"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/protocol/triple"
	"github.com/weftrpc/weft/proxy"
)

// histogram records durations in log-linear buckets: 64 per power of two,
// so any percentile is within ~1.6% of the exact value, in fixed memory.
type histogram struct {
	counts [64 * 64]uint64
	n      uint64
}

func bucketOf(ns uint64) int {
	if ns < 64 {
		return int(ns)
	}
	e := bits.Len64(ns) - 6 // keep the top 6 bits
	return e*64 + int(ns>>uint(e)) - 64 + 64
}

func bucketValue(b int) uint64 {
	if b < 64 {
		return uint64(b)
	}
	e := b/64 - 1
	m := uint64(b%64 + 64)
	return m << uint(e)
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

func (h *histogram) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := uint64(p * float64(h.n))
	if want >= h.n {
		want = h.n - 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > want {
			return time.Duration(bucketValue(i))
		}
	}
	return 0
}

// BenchResult is what `weft bench -json` prints.
type BenchResult struct {
	System      string  `json:"system"`
	Concurrency int     `json:"concurrency"`
	Size        int     `json:"size"`
	Seconds     float64 `json:"seconds"`
	Calls       uint64  `json:"calls"`
	Errors      uint64  `json:"errors"`
	QPS         float64 `json:"qps"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	// Connections is how many connections the client spread its calls over.
	Connections int `json:"connections"`
	// ClientCPUSeconds is the CPU (user + system) this process used during
	// the measured run, and ClientCPUPercent the same per second of it
	// (100: one core): what the load generator cost, to set beside the
	// provider's CPU.
	ClientCPUSeconds float64 `json:"client_cpu_s"`
	ClientCPUPercent float64 `json:"client_cpu_pct"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conc := fs.Int("c", 16, "concurrent callers")
	dur := fs.Duration("d", 10*time.Second, "duration of the measured run")
	warm := fs.Duration("warmup", time.Second, "unmeasured run before it")
	size := fs.Int("size", 1024, "payload bytes of each echo")
	conns := fs.Int("connections", 1, "connections to the provider")
	method := fs.String("method", "", "method taking and returning one String (default echo; Echo over tri://, taking and returning a message whose field 1 is the string, as google.protobuf.StringValue)")
	timeout := fs.Duration("timeout", 3*time.Second, "call timeout")
	asJSON := fs.Bool("json", false, "print the result as one JSON line")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	traceOut := fs.String("trace", "", "write an execution trace of the run to this file (go tool trace)")
	group := fs.String("group", "", "service group")
	version := fs.String("version", "", "service version")
	jsonArgs := fs.String("args", "", "call -method generically with these JSON arguments ('[5]'; types inferred, or -types) instead of an echo; the answers are not compared")
	types := fs.String("types", "", "with -args: comma-separated Java parameter types")
	var cfgFiles files
	fs.Var(&cfgFiles, "config", "consumer config file (repeatable): load the reference named by the argument, through its cluster, load balancer, routers and filters")
	attachments := map[string]any{}
	fs.Func("a", "an attachment `key=value` sent with every call (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		attachments[k] = v
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: weft bench [flags] [dubbo|tri://HOST:PORT/INTERFACE]   (default dubbo://127.0.0.1:20880/org.weft.bench.EchoService)
       weft bench [flags] embedded|zookeeper|nacos://REGISTRY INTERFACE
       weft bench [flags] -config consumer.yaml [-config ...] REFERENCE`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(cfgFiles) > 0 || fs.NArg() > 0 && registryScheme(fs.Arg(0)) {
		return benchReference(fs, cfgFiles, benchOpts{conc: *conc, warm: *warm, dur: *dur, size: *size, method: *method,
			timeout: *timeout, asJSON: *asJSON, group: *group, version: *version, jsonArgs: *jsonArgs, types: *types,
			attachments: attachments}, stdout, stderr)
	}
	target := "dubbo://127.0.0.1:20880/org.weft.bench.EchoService"
	if fs.NArg() > 0 {
		target = fs.Arg(0)
	}
	u, err := kernel.ParseURL(target)
	if err != nil || u.Path == "" || *conc < 1 || *size < 0 || (u.Protocol != dubbo.Name && u.Protocol != triple.Name) {
		fmt.Fprintln(stderr, "weft bench: need dubbo:// or tri://HOST:PORT/INTERFACE, -c >= 1 and -size >= 0")
		return 2
	}
	u = u.WithParams(map[string]string{
		kernel.KeyInterface:  u.Path,
		dubbo.KeyConnections: fmt.Sprint(*conns),
		kernel.KeyTimeout:    fmt.Sprint(timeout.Milliseconds()),
	})
	if *group != "" {
		u = u.WithParam(kernel.KeyGroup, *group)
	}
	if *version != "" {
		u = u.WithParam(kernel.KeyVersion, *version)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var p extension.Protocol = dubbo.New(log)
	call := callString
	if u.Protocol == triple.Name {
		if *conns != 1 {
			fmt.Fprintln(stderr, "weft bench: tri:// shares one HTTP/2 connection per provider; -connections is for dubbo://")
			return 2
		}
		p, call = triple.New(log), callMessage
		if *method == "" {
			*method = "Echo"
		}
	}
	if *method == "" {
		*method = "echo"
	}
	if c, ok := customCall(*jsonArgs, *types, attachments, call, stderr); !ok {
		return 2
	} else {
		call = c
	}
	defer p.Destroy()
	iv, err := p.Refer(context.Background(), u)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer iv.Destroy()
	payload := strings.Repeat("x", *size)
	// One call first: a wrong address or interface fails here, not as a
	// run full of errors.
	if _, err := call(iv, *method, payload); err != nil {
		fmt.Fprintln(stderr, "weft bench: first call failed:", err)
		return 1
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		trace.Start(f)
		defer trace.Stop()
	}
	res, hist := runBench(iv, call, *method, payload, *conc, *warm, *dur, progressWriter(stderr))
	res.System, res.Size, res.Connections = "weft", *size, *conns
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "weft bench %s c=%d size=%d connections=%d: %.0f qps, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p999 %.3f ms, %d calls, %d errors, client CPU %.0f%%\n",
			target, *conc, *size, *conns, res.QPS, res.P50Ms, res.P90Ms, res.P99Ms, res.P999Ms, res.Calls, res.Errors, res.ClientCPUPercent)
		printHistogram(stdout, hist)
	}
	return 0
}

// benchOpts are bench's flags that the reference forms use.
type benchOpts struct {
	conc                   int
	warm, dur, timeout     time.Duration
	size                   int
	method, group, version string
	jsonArgs, types        string
	asJSON                 bool
	attachments            map[string]any
}

// benchReference is weft bench through a reference: an interface through a
// registry, or a reference of config files (-config), called as an App
// calls it (its cluster, load balancer, routers, consumer filters).
func benchReference(fs *flag.FlagSet, cfgFiles files, o benchOpts, stdout, stderr io.Writer) int {
	var target invokeTarget
	switch {
	case len(cfgFiles) > 0 && fs.NArg() == 1:
		target = invokeTarget{files: cfgFiles, ref: fs.Arg(0)}
	case len(cfgFiles) == 0 && fs.NArg() == 2:
		target = invokeTarget{registry: fs.Arg(0), iface: fs.Arg(1)}
	default:
		fs.Usage()
		return 2
	}
	call, ok := customCall(o.jsonArgs, o.types, o.attachments, callString, stderr)
	if !ok {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), refStartWait)
	defer cancel()
	iv, closeFn, code := target.invoker(ctx, log, o.group, o.version, o.timeout, stderr)
	if iv == nil {
		return code
	}
	defer closeFn()
	method := o.method
	if method == "" {
		method = "echo"
	}
	payload := strings.Repeat("x", o.size)
	if _, err := call(iv, method, payload); err != nil {
		fmt.Fprintln(stderr, "weft bench: first call failed:", err)
		return 1
	}
	res, hist := runBench(iv, call, method, payload, o.conc, o.warm, o.dur, progressWriter(stderr))
	res.System, res.Size, res.Connections = "weft", o.size, 0
	name := target.ref
	if name == "" {
		name = target.registry + " " + target.iface
	}
	if o.asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "weft bench %s c=%d size=%d: %.0f qps, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p999 %.3f ms, %d calls, %d errors, client CPU %.0f%%\n",
			name, o.conc, o.size, res.QPS, res.P50Ms, res.P90Ms, res.P99Ms, res.P999Ms, res.Calls, res.Errors, res.ClientCPUPercent)
		printHistogram(stdout, hist)
	}
	return 0
}

// customCall is the call the flags ask for: the echo (def) as it is, with
// attachments, or a generic call of the method with JSON arguments (-args).
// false when -args is not a JSON array.
func customCall(jsonArgs, types string, attachments map[string]any, def func(kernel.Invoker, string, string) (any, error), stderr io.Writer) (func(kernel.Invoker, string, string) (any, error), bool) {
	if jsonArgs == "" {
		if len(attachments) == 0 {
			return def, true // the measured echo path, as lean as it was
		}
		return func(iv kernel.Invoker, method, payload string) (any, error) {
			inv := kernel.NewInvocation(method, payload)
			inv.ParamTypes = "Ljava/lang/String;"
			for k, v := range attachments {
				inv.SetAttachment(k, v)
			}
			res, err := iv.Invoke(context.Background(), inv)
			if err == nil && res.Value != payload {
				err = fmt.Errorf("echo returned %d bytes, sent %d", len(fmt.Sprint(res.Value)), len(payload))
			}
			return res.Value, err
		}, true
	}
	callArgs, err := proxy.JSONArgs(jsonArgs)
	if err != nil {
		fmt.Fprintf(stderr, "weft bench: -args must be a JSON array: %v\n", err)
		return nil, false
	}
	var typeList []string
	for _, a := range callArgs {
		typeList = append(typeList, javaType(a))
	}
	if types != "" {
		typeList = strings.Split(types, ",")
	}
	return func(iv kernel.Invoker, method, _ string) (any, error) {
		inv := proxy.GenericInvocation(method, typeList, callArgs)
		for k, v := range attachments {
			inv.SetAttachment(k, v)
		}
		res, err := iv.Invoke(context.Background(), inv)
		return res.Value, err
	}, true
}

// call makes one echo call. The URL's `timeout` bounds it, as a client-level
// timeout does in the peers' load generators (Kitex's WithRPCTimeout): a
// context of its own per call would cost the client three allocations
// more than any caller needs.
func callString(iv kernel.Invoker, method, payload string) (any, error) {
	ctx := context.Background()
	inv := kernel.NewInvocation(method, payload)
	inv.ParamTypes = "Ljava/lang/String;"
	res, err := iv.Invoke(ctx, inv)
	if err == nil && res.Value != payload {
		err = fmt.Errorf("echo returned %d bytes, sent %d", len(fmt.Sprint(res.Value)), len(payload))
	}
	return res.Value, err
}

var stringValue = reflect.TypeOf(&wrapperspb.StringValue{})

// callMessage is callString for a protobuf echo (tri://): the request and
// the answer are messages whose field 1 is the string (StringValue's
// encoding, which is also the peers' EchoRequest and EchoReply).
func callMessage(iv kernel.Invoker, method, payload string) (any, error) {
	res, err := iv.Invoke(context.Background(), kernel.NewInvocation(method, wrapperspb.String(payload)))
	if err != nil {
		return nil, err
	}
	d, ok := res.Value.(kernel.Decodable)
	if !ok {
		return nil, fmt.Errorf("echo returned %T, not a message", res.Value)
	}
	v, err := d.DecodeAs(stringValue)
	if err != nil {
		return nil, err
	}
	if got := v.Interface().(*wrapperspb.StringValue).GetValue(); got != payload {
		return nil, fmt.Errorf("echo returned %d bytes, sent %d", len(got), len(payload))
	}
	return payload, nil
}

// progressWriter returns where live progress goes: the terminal, or nowhere.
func progressWriter(stderr io.Writer) io.Writer {
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return f
		}
	}
	return nil
}

// window is the latency histogram of the last progress interval, shared by
// all callers: atomic buckets, emptied by the progress loop. It exists only
// when progress is shown, so a run into a pipe pays nothing for it.
type window struct {
	counts [64 * 64]atomic.Uint64
}

func (w *window) record(d time.Duration) { w.counts[bucketOf(uint64(d))].Add(1) }

// drain moves the window's counts into h and empties it.
func (w *window) drain(h *histogram) {
	for i := range w.counts {
		if c := w.counts[i].Swap(0); c > 0 {
			h.counts[i] += c
			h.n += c
		}
	}
}

func runBench(iv kernel.Invoker, call func(kernel.Invoker, string, string) (any, error), method, payload string, conc int, warm, dur time.Duration, progress io.Writer) (BenchResult, *histogram) {
	var measuring atomic.Bool
	var calls, errs atomic.Uint64
	var win *window
	if progress != nil {
		win = &window{}
	}
	stop := make(chan struct{})
	hists := make([]*histogram, conc)
	var wg sync.WaitGroup
	for i := range conc {
		h := &histogram{}
		hists[i] = h
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := call(iv, method, payload)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					errs.Add(1)
				} else {
					d := time.Since(start)
					h.record(d)
					if win != nil {
						win.record(d)
					}
				}
				calls.Add(1)
			}
		}()
	}
	time.Sleep(warm)
	if win != nil {
		win.drain(&histogram{}) // the warm-up's calls
	}
	measuring.Store(true)
	cpu0 := processCPU()
	start := time.Now()
	end := start.Add(dur)
	lastAt, lastCalls, lastErrs := start, uint64(0), uint64(0)
	for now := time.Now(); now.Before(end); now = time.Now() {
		time.Sleep(min(time.Second, end.Sub(now)))
		if win != nil {
			// One line a second: that second's rate, tail and errors,
			// so a stall or a burst of errors shows when it happens.
			var h histogram
			win.drain(&h)
			t, c, e := time.Now(), calls.Load(), errs.Load()
			fmt.Fprintf(progress, "%5.1fs  %9.0f qps  p99 %8.3f ms  %d errors\n",
				t.Sub(start).Seconds(), float64(c-lastCalls)/t.Sub(lastAt).Seconds(), ms(h.percentile(0.99)), e-lastErrs)
			lastAt, lastCalls, lastErrs = t, c, e
		}
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	close(stop)
	wg.Wait()
	var all histogram
	for _, h := range hists {
		all.merge(h)
	}
	return BenchResult{Concurrency: conc, Seconds: elapsed.Seconds(), Calls: calls.Load(), Errors: errs.Load(),
		QPS:              float64(calls.Load()) / elapsed.Seconds(),
		ClientCPUSeconds: cpu.Seconds(), ClientCPUPercent: 100 * cpu.Seconds() / elapsed.Seconds(),
		P50Ms: ms(all.percentile(0.50)), P90Ms: ms(all.percentile(0.90)), P99Ms: ms(all.percentile(0.99)), P999Ms: ms(all.percentile(0.999))}, &all
}

// printHistogram writes h as rows of power-of-two latency ranges with a bar
// each, from the fastest call's range to the slowest's.
func printHistogram(w io.Writer, h *histogram) {
	if h.n == 0 {
		return
	}
	// Row r holds the buckets whose values lie in [2^r, 2^(r+1)) ns.
	var rows [64]uint64
	first, last := -1, 0
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		r := bits.Len64(bucketValue(b)) - 1
		if r < 0 {
			r = 0
		}
		rows[r] += c
		if first < 0 {
			first = r
		}
		last = r
	}
	var peak uint64
	for _, c := range rows[first : last+1] {
		peak = max(peak, c)
	}
	fmt.Fprintln(w, "latency (ms)          calls")
	for r := first; r <= last; r++ {
		lo, hi := ms(time.Duration(uint64(1)<<r)), ms(time.Duration(uint64(1)<<(r+1)))
		bar := strings.Repeat("#", int((rows[r]*40+peak-1)/peak))
		if rows[r] == 0 {
			bar = ""
		}
		fmt.Fprintf(w, "%9.3f - %9.3f  %-40s %d\n", lo, hi, bar, rows[r])
	}
}
