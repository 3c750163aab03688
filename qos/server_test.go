package qos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeApp answers as an App whose state the test sets.
type fakeApp struct {
	mu      sync.Mutex
	ready   bool
	offline map[string]bool
	calls   []string
}

func (f *fakeApp) Services() []Service {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []Service{{ID: "greeter", Key: "org.example.Greeter:1.0.0", Exports: []string{"dubbo://127.0.0.1:20880"},
		Registries: []Registration{{Registry: "local", Registered: !f.offline["greeter"]}}}}
}

func (f *fakeApp) References() []Reference {
	return []Reference{{ID: "node", Key: "org.weft.Node", Discover: true, Providers: []string{"127.0.0.1:1", "127.0.0.1:2"}}}
}

func (f *fakeApp) Ports() []Port { return []Port{{Protocol: "dubbo", Addr: "127.0.0.1:20880"}} }

func (f *fakeApp) onOff(service string, off bool) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%v:%s", off, service))
	if service != "" && service != "greeter" {
		return nil, fmt.Errorf("%w: no service matches %q", ErrNotFound, service)
	}
	f.offline["greeter"] = off
	return []string{"org.example.Greeter:1.0.0"}, nil
}

func (f *fakeApp) Online(_ context.Context, s string) ([]string, error)  { return f.onOff(s, false) }
func (f *fakeApp) Offline(_ context.Context, s string) ([]string, error) { return f.onOff(s, true) }
func (f *fakeApp) Ready() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready, "not started"
}
func (f *fakeApp) Live() (bool, string)    { return true, "" }
func (f *fakeApp) Started() (bool, string) { return f.Ready() }

func (f *fakeApp) Invoke(_ context.Context, target, method, args string) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "invoke "+target+" "+method+" "+args)
	f.mu.Unlock()
	if target != "greeter" {
		return "", fmt.Errorf("%w: %s", ErrNotFound, target)
	}
	return `"hello"`, nil
}

func start(t *testing.T, cfg Config) (*Server, *fakeApp) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	app := &fakeApp{offline: map[string]bool{}}
	cfg.Addr, cfg.App = "127.0.0.1:0", app
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		goleak.VerifyNone(t, opt)
	})
	return s, app
}

// session is a telnet client: it reads up to the prompt.
type session struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialTelnet(t *testing.T, addr string) *session {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &session{t: t, c: c, br: bufio.NewReader(c)}
}

// until reads until the text ends with want (the prompt), within 10 s.
func (s *session) until(want string) string {
	s.t.Helper()
	s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	for !strings.HasSuffix(b.String(), want) {
		r, err := s.br.ReadByte()
		if err != nil {
			s.t.Fatalf("reading until %q: %v (got %q)", want, err, b.String())
		}
		b.WriteByte(r)
	}
	return b.String()
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.c, line); err != nil {
		s.t.Fatal(err)
	}
}

func TestQoSTelnetSession(t *testing.T) {
	srv, app := start(t, Config{})
	s := dialTelnet(t, srv.Addr())
	if got := s.until(Prompt); !strings.Contains(got, "weft QoS") {
		t.Fatalf("greeting %q: want the banner then %q", got, Prompt)
	}
	s.send("ls\r\n")
	got := s.until(Prompt)
	for _, want := range []string{"As Provider side:", "org.example.Greeter:1.0.0", "local(Y)", "As Consumer side:", "127.0.0.1:1, 127.0.0.1:2", "2 (registry)"} {
		if !strings.Contains(got, want) {
			t.Errorf("ls: no %q in\n%s", want, got)
		}
	}
	s.send("offline greeter\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "OK") {
		t.Errorf("offline: %q", got)
	}
	s.send("ls\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "local(N)") {
		t.Errorf("ls after offline: %q", got)
	}
	s.send("offline nosuch\r\n")
	if got := s.until(Prompt); !strings.Contains(got, `no service matches "nosuch"`) {
		t.Errorf("offline nosuch: %q", got)
	}
	// Telnet's negotiation bytes around a command are ignored.
	s.send("\xff\xfd\x01online\xff\xfb\x03\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "online: org.example.Greeter:1.0.0") {
		t.Errorf("online with telnet negotiation bytes: %q", got)
	}
	s.send("frobnicate\r\n")
	if got := s.until(Prompt); !strings.Contains(got, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %q", got)
	}
	s.send("help\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "offline") || !strings.Contains(got, "startup") {
		t.Errorf("help: %q", got)
	}
	s.send("ps\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "127.0.0.1:20880") || !strings.Contains(got, srv.Addr()) {
		t.Errorf("ps: %q", got)
	}
	s.send("ready\r\n")
	if got := s.until(Prompt); !strings.Contains(got, "false: not started") {
		t.Errorf("ready: %q", got)
	}
	s.send("quit\r\n")
	if got := s.until("BYE!\r\n"); got == "" {
		t.Error("no BYE!")
	}
	s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.br.ReadByte(); err != io.EOF {
		t.Errorf("after quit: %v, want EOF", err)
	}
	if len(app.calls) != 3 {
		t.Errorf("calls %v", app.calls)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestQoSHTTP(t *testing.T) {
	srv, app := start(t, Config{})
	base := "http://" + srv.Addr()
	for _, p := range []string{"/ready", "/startup"} {
		if code, body := get(t, base+p); code != 503 || !strings.HasPrefix(body, "false") {
			t.Errorf("%s before ready: %d %q", p, code, body)
		}
	}
	if code, body := get(t, base+"/live"); code != 200 || body != "true\n" {
		t.Errorf("/live: %d %q", code, body)
	}
	app.mu.Lock()
	app.ready = true
	app.mu.Unlock()
	if code, body := get(t, base+"/ready"); code != 200 || body != "true\n" {
		t.Errorf("/ready: %d %q", code, body)
	}
	if code, body := get(t, base+"/ls"); code != 200 || !strings.Contains(body, "org.example.Greeter") {
		t.Errorf("/ls: %d %q", code, body)
	}
	if code, body := get(t, base+"/offline?service=greeter"); code != 200 || !strings.Contains(body, "OK") {
		t.Errorf("/offline: %d %q", code, body)
	}
	if code, _ := get(t, base+"/offline?service=nosuch"); code != 404 {
		t.Errorf("/offline?service=nosuch: %d, want 404", code)
	}
	if code, _ := get(t, base+"/frobnicate"); code != 404 {
		t.Errorf("/frobnicate: %d, want 404", code)
	}
	if code, body := get(t, base+"/metrics"); code != 404 || !strings.Contains(body, "metrics disabled") {
		t.Errorf("/metrics without a handler: %d %q", code, body)
	}
	if code, _ := get(t, base+"/quit"); code != 400 {
		t.Errorf("/quit: %d, want 400", code)
	}
	if got := strings.Join(app.calls, " "); got != "true:greeter true:nosuch" {
		t.Errorf("calls %q", got)
	}
}

func TestQoSMetricsHandler(t *testing.T) {
	var served atomic.Int64
	srv, _ := start(t, Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		io.WriteString(w, "dubbo_up 1\n")
	})})
	if code, body := get(t, "http://"+srv.Addr()+"/metrics"); code != 200 || body != "dubbo_up 1\n" || served.Load() != 1 {
		t.Errorf("/metrics: %d %q (served %d)", code, body, served.Load())
	}
}

// Hostile or forgotten clients are bounded: a line without end is cut at
// MaxLine and its connection closed, a silent session closes after the idle
// timeout, sessions and connections beyond their limits are refused with a
// word, and none of it stops the probes answering.
func TestQoSBounds(t *testing.T) {
	// (Started first: each cleanup checks for goroutines left since its
	// own start, so the server started last must close first.)
	idleSrv, _ := start(t, Config{IdleTimeout: 300 * time.Millisecond})
	srv, _ := start(t, Config{MaxLine: 256, MaxSessions: 2, DetectTimeout: 50 * time.Millisecond})

	long := dialTelnet(t, srv.Addr())
	long.until(Prompt)
	long.send(strings.Repeat("x", 10000))
	if got := long.until("closing\r\n"); !strings.Contains(got, "line too long: at most 256 bytes") {
		t.Errorf("long line: %q", got)
	}

	idle := dialTelnet(t, idleSrv.Addr())
	idle.until(Prompt)
	if got := idle.until("closing\r\n"); !strings.Contains(got, "idle for 300ms") {
		t.Errorf("idle: %q", got)
	}

	// Two sessions fill the telnet slots; a third is told so.
	a, b := dialTelnet(t, srv.Addr()), dialTelnet(t, srv.Addr())
	a.until(Prompt)
	b.until(Prompt)
	third := dialTelnet(t, srv.Addr())
	if got := third.until("/help\r\n"); !strings.Contains(got, "too many telnet sessions (at most 2 at once)") {
		t.Errorf("third session: %q", got)
	}
	// HTTP still answers with the telnet slots full.
	if code, _ := get(t, "http://"+srv.Addr()+"/live"); code != 200 {
		t.Errorf("/live with telnet full: %d", code)
	}
	// Headers over 8 KiB are refused, not buffered.
	big, err := http.NewRequest("GET", "http://"+srv.Addr()+"/ls", nil)
	if err != nil {
		t.Fatal(err)
	}
	big.Header.Set("X-Big", strings.Repeat("y", 64<<10))
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB header: %d, want 431", resp.StatusCode)
	}

	// A client that sends half a request line and stalls is cut by the
	// HTTP server's read timeout, not held for ever; meanwhile others pass.
	stall, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	io.WriteString(stall, "GET /ready HTTP/1.1\r\nHost: x\r\n")
	if code, _ := get(t, "http://"+srv.Addr()+"/live"); code != 200 {
		t.Errorf("/live beside a stalled request: %d", code)
	}
}

// More connections than MaxConns: the extra ones are refused at once with
// a line, and the server takes new ones once the others close.
func TestQoSMaxConns(t *testing.T) {
	srv, _ := start(t, Config{MaxConns: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Make sure the server has accepted both (their prompt arrives).
	for _, c := range held {
		s := &session{t: t, c: c, br: bufio.NewReader(c)}
		s.until(Prompt)
	}
	over := dialTelnet(t, srv.Addr())
	if got := over.until("later\r\n"); !strings.Contains(got, "too many QoS connections (at most 2 at once)") {
		t.Errorf("over the limit: %q", got)
	}
	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + srv.Addr() + "/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots not freed after the connections closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends sessions in the middle and leaves no goroutine (start's
// cleanup checks); Listen on a taken port fails with the bind error.
func TestQoSCloseAndBindError(t *testing.T) {
	srv, _ := start(t, Config{})
	s := dialTelnet(t, srv.Addr())
	s.until(Prompt)
	if _, err := Listen(Config{Addr: srv.Addr(), App: &fakeApp{}}); err == nil {
		t.Fatal("a second server bound the same port")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(s.br); err != nil {
		t.Fatalf("session after Close: %v, want EOF", err)
	}
}

func TestQueryArgs(t *testing.T) {
	got, err := queryArgs("service=org.a.B&method=x%20y&bare")
	if err != nil || strings.Join(got, "|") != "org.a.B|x y|bare" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := queryArgs("service=%zz"); err == nil {
		t.Fatal("bad escape accepted")
	}
}

// invoke, Dubbo's: SERVICE.METHOD(JSON ARGS) over telnet (the rest of the
// line, its spaces kept) and HTTP; a usage error, an unknown service
// (404), and only from the App's machine.
func TestQoSInvoke(t *testing.T) {
	srv, app := start(t, Config{})
	s := dialTelnet(t, srv.Addr())
	s.until(Prompt)
	s.send(`invoke greeter.sayHello("a  b", 2)` + "\r\n")
	if got := s.until(Prompt); !strings.Contains(got, `result: "hello"`) || !strings.Contains(got, "elapsed: ") {
		t.Fatalf("telnet invoke: %q", got)
	}
	base := "http://" + srv.Addr()
	if code, body := get(t, base+`/invoke?greeter.sayHello(%22x%22)`); code != 200 || !strings.HasPrefix(body, `result: "hello"`) {
		t.Errorf("HTTP invoke: %d %q", code, body)
	}
	if code, body := get(t, base+`/invoke?nobody.sayHello()`); code != 404 || !strings.Contains(body, "nobody") {
		t.Errorf("unknown service: %d %q", code, body)
	}
	if code, body := get(t, base+`/invoke?sayHello`); code != 400 || !strings.Contains(body, "usage: invoke SERVICE.METHOD(JSON ARGS)") {
		t.Errorf("usage: %d %q", code, body)
	}
	app.mu.Lock()
	calls := strings.Join(app.calls, "|")
	app.mu.Unlock()
	if !strings.Contains(calls, `invoke greeter sayHello ["a  b", 2]`) || !strings.Contains(calls, `invoke greeter sayHello ["x"]`) {
		t.Errorf("calls %q", calls)
	}
	if r := srv.run("invoke", []string{`greeter.sayHello()`}, false, false); r.status != 403 || !strings.Contains(r.text, "from the App's machine") {
		t.Errorf("from another host: %d %q", r.status, r.text)
	}
	for addr, want := range map[string]bool{"127.0.0.1:5": true, "[::1]:5": true, "10.1.2.3:5": false, "bogus": false} {
		if isLoopback(addr) != want {
			t.Errorf("isLoopback(%q) != %v", addr, want)
		}
	}
}
