package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/qos"
)

// Issue 12, item 3: the QoS port, Dubbo's way, over real TCP.

// qosGet asks the QoS port over HTTP, a connection per request.
func qosGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	code, body, err := tryQosGet(addr, path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	return code, body
}

func tryQosGet(addr, path string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// telnetSession is a QoS telnet client.
type telnetSession struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func qosTelnet(t *testing.T, addr string) *telnetSession {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &telnetSession{t: t, c: c, br: bufio.NewReader(c)}
	s.read()
	return s
}

// read returns what comes up to the next prompt.
func (s *telnetSession) read() string {
	s.t.Helper()
	s.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var b strings.Builder
	for !strings.HasSuffix(b.String(), qos.Prompt) {
		r, err := s.br.ReadByte()
		if err != nil {
			s.t.Fatalf("telnet: %v after %q", err, b.String())
		}
		b.WriteByte(r)
	}
	return strings.TrimSuffix(b.String(), qos.Prompt)
}

func (s *telnetSession) do(line string) string {
	s.t.Helper()
	if _, err := io.WriteString(s.c, line+"\r\n"); err != nil {
		s.t.Fatal(err)
	}
	return s.read()
}

// recRegistry is a registry that holds the first Register until released
// and, when Unregister comes, asks the App's /ready what it answers then:
// the order of readiness and unregistration, seen from the registry.
type recRegistry struct {
	release   chan struct{}
	once      sync.Once
	qosAddr   func() string
	mu        sync.Mutex
	events    []string
	readyAtUn int // /ready's status when Unregister was called
}

func (r *recRegistry) log(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recRegistry) Register(ctx context.Context, u *kernel.URL) error {
	r.once.Do(func() {
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	})
	r.log("register")
	return nil
}

func (r *recRegistry) Unregister(_ context.Context, u *kernel.URL) error {
	code, _, err := tryQosGet(r.qosAddr(), "/ready")
	if err != nil {
		code = -1
	}
	r.mu.Lock()
	r.readyAtUn = code
	r.mu.Unlock()
	r.log("unregister")
	return nil
}

func (r *recRegistry) Subscribe(context.Context, *kernel.URL, extension.NotifyListener) error {
	return nil
}
func (r *recRegistry) Unsubscribe(context.Context, *kernel.URL, extension.NotifyListener) error {
	return nil
}
func (r *recRegistry) Close() error                                        { return nil }
func (r *recRegistry) GetRegistry(*kernel.URL) (extension.Registry, error) { return r, nil }

// Readiness through an App's life, over HTTP: while Start waits on the
// registry the probes say not ready and not started (but live); after
// Start, 200 everywhere; at graceful stop /ready is 503 before the registry
// sees the unregistration, while the provider still serves.
func TestQoSReadyFollowsTheAppsLife(t *testing.T) {
	noLeaks(t)
	reg := &recRegistry{release: make(chan struct{})}
	var app *weft.App
	reg.qosAddr = func() string { return app.QoSAddr() }
	var err error
	app, err = weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("node", &node{name: "a"}),
		weft.WithPlugins(weft.NewPlugin("rec", weft.Provide("rec", func(weft.Host) (extension.RegistryFactory, error) { return reg, nil }, nil))),
		weft.WithConfig(weft.ConfigYAML(`
qos: {port: 0}
registries: {rec: {address: "rec://x"}}
protocols: {dubbo: {port: 0}}
provider:
  shutdown: {wait: 300}
  services:
    node: {interface: org.weft.Node}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if app.QoSAddr() != "" {
		t.Fatalf("QoS listening before Start: %s", app.QoSAddr())
	}
	started := make(chan error, 1)
	go func() { started <- app.Start(context.Background()) }()
	var addr string
	for deadline := time.Now().Add(15 * time.Second); addr == ""; time.Sleep(5 * time.Millisecond) {
		if addr = app.QoSAddr(); addr == "" && time.Now().After(deadline) {
			t.Fatal("the QoS server did not come up within 15 s of Start")
		}
	}
	// Start is held in Register: exported, not registered.
	for path, want := range map[string]int{"/ready": 503, "/startup": 503, "/live": 200} {
		if code, body := qosGet(t, addr, path); code != want {
			t.Errorf("%s while starting: %d %q, want %d", path, code, body, want)
		}
	}
	if code, body := qosGet(t, addr, "/offline"); code != 500 || !strings.Contains(body, "still starting") {
		t.Errorf("/offline while starting: %d %q", code, body)
	}
	close(reg.release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/ready", "/startup", "/live"} {
		if code, body := qosGet(t, addr, path); code != 200 || body != "true\n" {
			t.Errorf("%s after Start: %d %q, want 200 true", path, code, body)
		}
	}
	s := qosTelnet(t, addr)
	ls := s.do("ls")
	for _, want := range []string{"org.weft.Node", "dubbo://127.0.0.1:", "rec(Y)"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls: no %q in\n%s", want, ls)
		}
	}
	ps := s.do("ps")
	if !strings.Contains(ps, "dubbo") || !strings.Contains(ps, addr) {
		t.Errorf("ps:\n%s", ps)
	}
	s.c.Close()

	// Stop: a poller sees /ready turn 503; the registry records what
	// /ready answered when Unregister came.
	var first503 atomic.Int64
	pollDone := make(chan struct{})
	stopAt := time.Now()
	go func() {
		defer close(pollDone)
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			code, _, err := tryQosGet(addr, "/ready")
			if err != nil {
				return // the server has closed
			}
			if code == 503 && first503.Load() == 0 {
				first503.Store(int64(time.Since(stopAt)))
			}
		}
	}()
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-pollDone
	reg.mu.Lock()
	events, readyAtUn := strings.Join(reg.events, ","), reg.readyAtUn
	reg.mu.Unlock()
	if events != "register,unregister" {
		t.Errorf("registry saw %s", events)
	}
	if readyAtUn != 503 {
		t.Errorf("/ready answered %d when the provider unregistered; want 503 (not ready before it leaves the registry)", readyAtUn)
	}
	if first503.Load() == 0 {
		t.Error("the poller never saw /ready answer 503 during the graceful stop")
	}
	t.Logf("graceful stop: /ready 503 %v after Stop was called; /ready at Unregister: %d", time.Duration(first503.Load()), readyAtUn)
	if app.QoSAddr() != "" {
		t.Errorf("QoSAddr after Stop: %q", app.QoSAddr())
	}
	if _, _, err := tryQosGet(addr, "/live"); err == nil {
		t.Error("the QoS port still answers after Stop")
	}
}

// qosNode is a provider that counts its calls and remembers the last one.
type qosNode struct {
	name  string
	calls atomic.Int64
	last  atomic.Int64 // unix nanos of the last call
}

func (n *qosNode) Who(_ context.Context, _ string) (string, error) {
	n.calls.Add(1)
	n.last.Store(time.Now().UnixNano())
	return n.name, nil
}

func startQoSProvider(t *testing.T, registry string, n *qosNode) *weft.App {
	t.Helper()
	return startApp(t, fmt.Sprintf(`
qos: {port: 0}
registries: {local: {address: "%s"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    node: {interface: org.weft.Node}
`, registry), weft.WithService("node", n))
}

// offline under load: two providers and a consumer calling from 8
// goroutines through the embedded registry, retries 0 (a failure cannot
// hide behind a retry). offline on one provider: within the registry's
// notification time it gets no more calls, and no call fails; online
// brings its traffic back.
func TestQoSOfflineUnderLoad(t *testing.T) {
	noLeaks(t)
	registry := "embedded://" + t.TempDir() + "?heartbeat=200"
	a, b := &qosNode{name: "a"}, &qosNode{name: "b"}
	appA := startQoSProvider(t, registry, a)
	startQoSProvider(t, registry, b)
	qa := appA.QoSAddr()
	if qa == "" {
		t.Fatal("provider a has no QoS address")
	}

	var c struct {
		Who func(ctx context.Context, s string) (string, error)
	}
	startApp(t, fmt.Sprintf(`
qos: {enable: false}
registries: {local: {address: "%s"}}
consumer:
  references:
    node: {interface: org.weft.Node, retries: 0, timeout: 5000}
`, registry), weft.WithReference("node", &c))

	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Who(context.Background(), "x"); err != nil {
					if failed.Add(1) <= 5 {
						t.Logf("call failed: %v", err)
					}
					time.Sleep(10 * time.Millisecond) // no spin while no provider is known yet
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// waitCalls waits (bounded) until n has taken more calls than from.
	waitCalls := func(n *qosNode, from int64, within time.Duration) time.Duration {
		t.Helper()
		t0 := time.Now()
		for n.calls.Load() <= from+10 {
			if time.Since(t0) > within {
				t.Fatalf("provider %s took %d calls in %v (had %d): no traffic", n.name, n.calls.Load()-from, within, from)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(t0)
	}
	waitCalls(a, 0, 15*time.Second)
	waitCalls(b, 0, 15*time.Second)
	failedBefore := failed.Load()

	offAt := time.Now()
	code, body := qosGet(t, qa, "/offline?service=org.weft.Node")
	if code != 200 || !strings.Contains(body, "OK") {
		t.Fatalf("/offline: %d %q", code, body)
	}
	// The registry tells the consumer within ~50 ms (file events) or a
	// heartbeat (200 ms); 5 s is the bound a loaded machine gets.
	const quietFor, bound = time.Second, 5 * time.Second
	for {
		last := time.Unix(0, a.last.Load())
		if time.Since(last) >= quietFor {
			t.Logf("offline: provider a's last call came %v after offline (a: %d calls, b: %d)", last.Sub(offAt), a.calls.Load(), b.calls.Load())
			break
		}
		if time.Since(offAt) > bound+quietFor {
			t.Fatalf("provider a still gets calls %v after offline (last %v ago)", time.Since(offAt), time.Since(last))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Unix(0, a.last.Load()).Sub(offAt); d > bound {
		t.Errorf("provider a's calls stopped %v after offline; want within %v", d, bound)
	}
	// b carries the traffic meanwhile.
	waitCalls(b, b.calls.Load(), 5*time.Second)
	// Dubbo 3: every service offline makes the App unready; it stays live.
	if code, body := qosGet(t, qa, "/ready"); code != 503 || !strings.Contains(body, "offline") {
		t.Errorf("/ready with every service offline: %d %q, want 503", code, body)
	}
	if code, _ := qosGet(t, qa, "/live"); code != 200 {
		t.Errorf("/live offline: %d, want 200", code)
	}
	if ls := qosTelnet(t, qa).do("ls"); !strings.Contains(ls, "local(N)") {
		t.Errorf("ls offline:\n%s", ls)
	}

	// online, by telnet this time.
	s := qosTelnet(t, qa)
	onAt, from := time.Now(), a.calls.Load()
	if out := s.do("online org.weft.Node"); !strings.Contains(out, "OK") {
		t.Fatalf("online: %q", out)
	}
	waitCalls(a, from, 15*time.Second)
	t.Logf("online: provider a had taken 10 calls again %v after online", time.Since(onAt))
	if code, _ := qosGet(t, qa, "/ready"); code != 200 {
		t.Errorf("/ready online again: %d", code)
	}
	if n := failed.Load() - failedBefore; n != 0 {
		t.Errorf("%d calls failed across offline and online; want 0", n)
	}
}

// A QoS port already taken (another App, another process) is a warning:
// the App starts without QoS, as Dubbo's does.
func TestQoSPortTakenIsAWarning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(log), weft.WithService("greeter", &node{name: "a"}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
qos: {port: %d}
protocols: {injvm: {}}
provider:
  services:
    greeter: {interface: org.weft.Node}
`, port))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatalf("Start failed for a taken QoS port: %v", err)
	}
	defer app.Stop(context.Background())
	if app.QoSAddr() != "" {
		t.Errorf("QoSAddr %q with the port taken", app.QoSAddr())
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "weft: qos: cannot listen") || !strings.Contains(out, "qos.port") {
		t.Errorf("no warning naming the fix in the log:\n%s", out)
	}
}

// The QoS port serves the App's own metrics at /metrics, as Dubbo's does:
// a provider's counters after real calls over TCP; with metrics off, 404.
func TestQoSServesTheAppsMetrics(t *testing.T) {
	noLeaks(t)
	addr := freePort(t)
	provider := startApp(t, fmt.Sprintf(`
application: {name: qos-metrics}
qos: {port: 0}
protocols: {dubbo: {port: %s}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("vault", &vault{}))
	var c tokenClient
	startApp(t, fmt.Sprintf(`
qos: {enable: false}
consumer: {references: {vault: {interface: org.weft.Vault, url: "dubbo://%s"}}}
`, addr), weft.WithReference("vault", &c))
	for range 3 {
		if _, err := c.Secret(context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
	}
	code, body := qosGet(t, provider.QoSAddr(), "/metrics")
	want := `dubbo_provider_requests_total{application_name="qos-metrics",`
	if code != 200 || !strings.Contains(body, want) {
		t.Fatalf("/metrics: %d, want 200 with %s...:\n%.2000s", code, want, body)
	}
	if !regexp.MustCompile(`(?m)^dubbo_provider_requests_total\{[^}]*interface="org.weft.Vault"[^}]*method="secret"[^}]*\} 3$`).MatchString(body) {
		t.Errorf("the provider's counter of secret is not 3:\n%s", grepLines(body, "dubbo_provider_requests_total"))
	}

	off := startApp(t, `
qos: {port: 0}
metrics: {enable: false}
protocols: {dubbo: {port: 0}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, weft.WithService("vault", &vault{}))
	if code, body := qosGet(t, off.QoSAddr(), "/metrics"); code != 404 || !strings.Contains(body, "metrics disabled") {
		t.Errorf("/metrics with metrics off: %d %q, want 404", code, body)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
