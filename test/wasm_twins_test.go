package test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// The SDKs' example filters (authz, rewrite, ratelimit), in each guest
// language, against native Go twins: the same chain, configured the same way,
// in a provider App called over dubbo by a consumer App, must give the same
// outcome call by call (success, error code on both sides, the attachment the
// provider saw and the one the response carried).

const twinToken = "s3cret"

// twinLang is one SDK: where its build.sh is and the values its rewrite
// example sets (on request; on response, "" when it has no on_response).
type twinLang struct {
	sdk, rewrite, rewriteResponse string
}

var twinLangs = []twinLang{
	{sdk: "c", rewrite: "by-wasm-c", rewriteResponse: "by-wasm-c"},
	{sdk: "rust", rewrite: "by-wasm-rust", rewriteResponse: "by-wasm-rust"},
	{sdk: "go", rewrite: "by-wasm-go"},
	{sdk: "assemblyscript", rewrite: "by-wasm-as"},
}

// twinCall is one row of the table every chain runs.
type twinCall struct {
	method, token string // token "": no attachment
	ok            bool
	code          kernel.Code // the provider side's code when !ok
}

var twinTable = []twinCall{
	{method: "rewritten", ok: false, code: kernel.CodeForbidden},                  // no token
	{method: "rewritten", token: "wrong", ok: false, code: kernel.CodeForbidden},  // wrong token
	{method: "rewritten", token: "s3creX", ok: false, code: kernel.CodeForbidden}, // same length, differs
	{method: "rewritten", token: twinToken, ok: true},                             // right token
	{method: "hit", token: twinToken, ok: true},                                   // ratelimit 3/s: 1
	{method: "hit", token: twinToken, ok: true},                                   // 2
	{method: "hit", token: twinToken, ok: true},                                   // 3
	{method: "hit", token: twinToken, ok: false, code: kernel.CodeLimitExceeded},  // 4: over
	{method: "hit", token: twinToken, ok: false, code: kernel.CodeLimitExceeded},  // 5: over
	{method: "other", token: twinToken, ok: true},                                 // another method passes
}

// twinOutcome is what one call gave, seen from both ends.
type twinOutcome struct {
	ok             bool
	consumerCode   kernel.Code // kernel.CodeOf of the consumer's error
	providerCode   kernel.Code // kernel.CodeOf of the error leaving the provider's chain
	rewriteOK      bool        // the provider saw x-rewritten = the filter's own value
	sawRewrite     string
	respRewrite    string // x-rewritten-response on the result at the provider's chain
	consumerResp   string // x-rewritten-response as the consumer received it
	consumerErrMsg string
}

func (o twinOutcome) comparable() twinOutcome {
	o.sawRewrite, o.consumerErrMsg = "", ""
	return o
}

// twinService answers with the x-rewritten attachment it received.
type twinService struct{}

func (twinService) Rewritten(ctx context.Context) (string, error) { return sawRewritten(ctx) }
func (twinService) Hit(ctx context.Context) (string, error)       { return sawRewritten(ctx) }
func (twinService) Other(ctx context.Context) (string, error)     { return sawRewritten(ctx) }

func sawRewritten(ctx context.Context) (string, error) {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return "", fmt.Errorf("no invocation in context")
	}
	return inv.AttachmentString("x-rewritten"), nil
}

// --- the native twins -------------------------------------------------------

// authzTwin rejects (forbidden) a call whose token attachment is missing or
// differs from token.
func authzTwin(token string) kernel.Factory[extension.Filter] {
	return func() (extension.Filter, error) {
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			got, ok := inv.Attachment("token")
			if s, isStr := got.(string); !ok || !isStr || s != token {
				return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "native-authz rejected the call: missing or wrong token")
			}
			return next.Invoke(ctx, inv)
		}), nil
	}
}

// rewriteTwin sets x-rewritten on the request and, when resp is not "",
// x-rewritten-response on the result (whatever the outcome, as the host runs
// weft_on_response).
func rewriteTwin(req, resp string) kernel.Factory[extension.Filter] {
	return func() (extension.Filter, error) {
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			inv.SetAttachment("x-rewritten", req)
			res, err := next.Invoke(ctx, inv)
			if resp != "" {
				if res.Attachments == nil {
					res.Attachments = map[string]any{}
				}
				res.Attachments["x-rewritten-response"] = resp
			}
			return res, err
		}), nil
	}
}

// ratelimitTwin lets limit calls per method through in each fixed window of
// 1000 ms starting at a multiple of 1000 ms since the epoch (the host's
// counter_add windows), rejecting the others with code 7.
func ratelimitTwin(limit int64) kernel.Factory[extension.Filter] {
	type window struct{ start, n int64 }
	var mu sync.Mutex
	counts := map[string]*window{}
	return func() (extension.Filter, error) {
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			now := time.Now().UnixMilli()
			start := now - now%1000
			mu.Lock()
			w := counts[inv.Method]
			if w == nil || w.start != start {
				w = &window{start: start}
				counts[inv.Method] = w
			}
			w.n++
			n := w.n
			mu.Unlock()
			if n > limit {
				return kernel.Result{}, kernel.Errorf(kernel.CodeLimitExceeded, "rate limit exceeded for method %s: %d calls per second", inv.Method, limit)
			}
			return next.Invoke(ctx, inv)
		}), nil
	}
}

// twinRecorder is the outermost provider filter: it records what the chain
// inside it returned.
type twinRecorder struct {
	mu   sync.Mutex
	last twinOutcome
}

func (r *twinRecorder) factory() kernel.Factory[extension.Filter] {
	return func() (extension.Filter, error) {
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			res, err := next.Invoke(ctx, inv)
			var o twinOutcome
			if err != nil {
				o.providerCode = kernel.CodeOf(err)
			}
			o.respRewrite, _ = res.Attachments["x-rewritten-response"].(string)
			r.mu.Lock()
			r.last = o
			r.mu.Unlock()
			return res, err
		}), nil
	}
}

func (r *twinRecorder) take() twinOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.last
	r.last = twinOutcome{providerCode: 255}
	return o
}

// --- building the examples ---------------------------------------------------

// buildSDKExamples runs sdk/<sdk>/build.sh into dir and returns the modules by
// example name. skip is set (and err nil) when the toolchain is missing and CI
// is not set; under CI a missing toolchain is an error.
func buildSDKExamples(sdk, dir string) (mods map[string]string, skip string, err error) {
	missing := func(what, install string) (map[string]string, string, error) {
		if os.Getenv("CI") == "" {
			return nil, fmt.Sprintf("%s is not installed (%s): the %s examples are not built", what, install, sdk), nil
		}
		return nil, "", fmt.Errorf("%s is not installed but CI is set: .ci/run must install it (%s)", what, install)
	}
	env := os.Environ()
	switch sdk {
	case "c":
		if _, err := exec.LookPath("clang"); err != nil {
			return missing("clang", "apt-get install clang lld")
		}
	case "rust":
		rustc := "/usr/bin/rustc"
		out, err := exec.Command(rustc, "--print", "sysroot").Output()
		if err != nil {
			return missing("Debian's rustc", "apt-get install rustc libstd-rust-dev-wasm32 lld")
		}
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown")); err != nil {
			return missing("rustc's wasm32-unknown-unknown std", "apt-get install libstd-rust-dev-wasm32")
		}
		env = append(env, "RUSTC="+rustc)
	case "go":
		if _, err := exec.LookPath("go"); err != nil {
			return missing("go", "the Go toolchain")
		}
	case "assemblyscript":
		for _, bin := range []string{"node", "npm"} {
			if _, err := exec.LookPath(bin); err != nil {
				return missing(bin, "node >= 20 and npm")
			}
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "sdk", sdk, "build.sh"))
	if err != nil {
		return nil, "", err
	}
	out := filepath.Join(dir, sdk)
	cmd := exec.Command("bash", script, out)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("bash %s %s: %v\n%s%s", script, out, err, stdout.Bytes(), stderr.Bytes())
	}
	mods = map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if p := strings.TrimSpace(sc.Text()); strings.HasSuffix(p, ".wasm") {
			mods[strings.TrimSuffix(filepath.Base(p), ".wasm")] = p
		}
	}
	for _, name := range []string{"authz", "rewrite", "ratelimit"} {
		if _, err := os.Stat(mods[name]); err != nil {
			return nil, "", fmt.Errorf("%s build.sh did not produce %s.wasm (printed %q): %v", sdk, name, stdout.String(), err)
		}
	}
	return mods, "", nil
}

// --- running the table -------------------------------------------------------

// runTwinTable starts a provider App whose chain is filterList (plus the
// recorder, outermost) and a consumer App, runs twinTable and returns the
// outcomes.
func runTwinTable(t *testing.T, lang twinLang, wasmYAML, filterList string, opts ...weft.Option) []twinOutcome {
	t.Helper()
	rec := &twinRecorder{}
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	opts = append(opts, weft.WithService("twin", twinService{}),
		weft.WithFilter("twin-recorder", &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: -1 << 20}, rec.factory()))
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
%s
provider:
  filter: %q
  services:
    twin: {interface: org.weft.Twin}
`, port, wasmYAML, "default,"+filterList), opts...)
	consumer := startApp(t, fmt.Sprintf(`
consumer:
  references:
    twin: {interface: org.weft.Twin, url: "dubbo://%s", retries: 0, timeout: 5000}
`, addr), weft.WithReference("twin", &struct {
		Rewritten func(context.Context) (string, error)
	}{}))
	ref, err := consumer.Reference("twin")
	if err != nil {
		t.Fatal(err)
	}
	call := func(c twinCall) twinOutcome {
		inv := kernel.NewInvocation(c.method)
		if c.token != "" {
			inv.SetAttachment("token", c.token)
		}
		rec.take()
		res, err := ref.Invoke(context.Background(), inv)
		o := rec.take()
		o.ok = err == nil
		if err != nil {
			o.consumerCode = kernel.CodeOf(err)
			o.consumerErrMsg = err.Error()
		} else {
			o.sawRewrite, _ = res.Value.(string)
			o.rewriteOK = o.sawRewrite == lang.rewrite
		}
		o.consumerResp, _ = res.Attachments["x-rewritten-response"].(string)
		return o
	}
	var outs []twinOutcome
	for i, c := range twinTable {
		if c.method == "hit" && (i == 0 || twinTable[i-1].method != "hit") {
			// The five calls to one method must fall in one 1000 ms window
			// (windows start at multiples of 1000 ms): start early in one.
			if ms := time.Now().UnixMilli() % 1000; ms > 700 {
				time.Sleep(time.Duration(1000-ms+5) * time.Millisecond)
			}
		}
		outs = append(outs, call(c))
	}
	return outs
}

func TestWasmExamplesMatchNativeTwins(t *testing.T) {
	dir := t.TempDir()
	type built struct {
		mods map[string]string
		skip string
		err  error
		took time.Duration
		done chan struct{}
	}
	// All four build at once; each language runs as soon as its own is built.
	builds := make([]*built, len(twinLangs))
	for i, l := range twinLangs {
		b := &built{done: make(chan struct{})}
		builds[i] = b
		go func() {
			defer close(b.done)
			start := time.Now()
			b.mods, b.skip, b.err = buildSDKExamples(l.sdk, dir)
			b.took = time.Since(start)
		}()
	}
	t.Cleanup(func() { // t.TempDir is removed only after every build ended
		for _, b := range builds {
			<-b.done
		}
	})

	for i, lang := range twinLangs {
		t.Run(lang.sdk, func(t *testing.T) {
			b := builds[i]
			<-b.done
			if b.err != nil {
				t.Fatal(b.err)
			}
			if b.skip != "" {
				t.Skip(b.skip)
			}
			t.Logf("built %s examples in %v", lang.sdk, b.took.Round(time.Millisecond))
			start := time.Now()
			native := runTwinTable(t, lang, "",
				"native-authz,native-rewrite,native-ratelimit",
				weft.WithFilter("native-authz", nil, authzTwin(twinToken)),
				weft.WithFilter("native-rewrite", nil, rewriteTwin(lang.rewrite, lang.rewriteResponse)),
				weft.WithFilter("native-ratelimit", nil, ratelimitTwin(3)))
			tookNative := time.Since(start)
			start = time.Now()
			wasm := runTwinTable(t, lang, fmt.Sprintf(`
wasm:
  filters:
    wasm-authz: {path: %q, max_memory_pages: 256, config: {token: %s}}
    wasm-rewrite: {path: %q, max_memory_pages: 256}
    wasm-ratelimit: {path: %q, max_memory_pages: 256, config: {limit: 3}}
`, b.mods["authz"], twinToken, b.mods["rewrite"], b.mods["ratelimit"]),
				"wasm-authz,wasm-rewrite,wasm-ratelimit")
			t.Logf("native chain %v, wasm chain %v (App start and %d calls each)",
				tookNative.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), len(twinTable))

			for j, c := range twinTable {
				n, w := native[j], wasm[j]
				what := fmt.Sprintf("call %d (%s, token %q)", j+1, c.method, c.token)
				if n.comparable() != w.comparable() {
					t.Errorf("%s: wasm %+v, native twin %+v", what, w, n)
				}
				for side, o := range map[string]twinOutcome{"wasm": w, "native": n} {
					if o.ok != c.ok {
						t.Errorf("%s: %s ok=%v, want %v (%s)", what, side, o.ok, c.ok, o.consumerErrMsg)
						continue
					}
					if !c.ok {
						if o.providerCode != c.code {
							t.Errorf("%s: %s provider-side code %v, want %v", what, side, o.providerCode, c.code)
						}
						continue
					}
					if !o.rewriteOK {
						t.Errorf("%s: %s: the provider saw x-rewritten %q, want the filter's own %q", what, side, o.sawRewrite, lang.rewrite)
					}
					if o.consumerResp != lang.rewriteResponse {
						t.Errorf("%s: %s: the response carried x-rewritten-response %q, want %q", what, side, o.consumerResp, lang.rewriteResponse)
					}
				}
			}
			if testing.Verbose() {
				for j := range twinTable {
					t.Logf("call %d %s: wasm %+v", j+1, twinTable[j].method, wasm[j])
				}
			}
		})
	}
}
