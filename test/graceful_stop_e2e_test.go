package test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	nacos "github.com/weftrpc/weft/registry-nacos"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// Issue 10, item 3: a provider that leaves the registry (SIGTERM: it
// unregisters, waits provider.shutdown.wait, drains, exits) loses no call of
// a consumer that found it through the registry, and runs none twice. The
// consumer stops choosing it as soon as it hears of the unregistration but
// keeps its connection until the calls already sent on it are answered.

// The child process: a provider of org.weft.Slow whose method takes
// gracefulCallTime and appends each call id it starts to a file (one
// O_APPEND write per call, so nothing is lost if the process dies).
const (
	gracefulChildEnv = "WEFTTEST_GRACEFUL_PROVIDER" // registry address
	gracefulNameEnv  = "WEFTTEST_GRACEFUL_NAME"
	gracefulPortEnv  = "WEFTTEST_GRACEFUL_PORT"
	gracefulLogEnv   = "WEFTTEST_GRACEFUL_LOG"

	gracefulCallTime = 200 * time.Millisecond
	gracefulCallers  = 16
	// The consumer's timeout is far above gracefulCallTime: on a loaded
	// machine (2 cores, -race, fuzzers) a 200 ms call was seen to take 3 s,
	// and a timeout is failed (failfast) or retried (failover) whatever
	// the provider does, which is not what this test is about.
	gracefulTimeout = 10 * time.Second
)

// gracefulChildMain runs the child when this binary was started as one;
// TestMain (frozen_test.go) calls it first.
func gracefulChildMain() {
	if address := os.Getenv(gracefulChildEnv); address != "" {
		gracefulChild(address, os.Getenv(gracefulNameEnv), os.Getenv(gracefulPortEnv), os.Getenv(gracefulLogEnv))
	}
}

type slowSvc struct {
	name  string
	log   *os.File
	calls atomic.Int64
}

func (s *slowSvc) Work(_ context.Context, id string) (string, error) {
	s.calls.Add(1)
	if _, err := s.log.WriteString(id + "\n"); err != nil {
		fmt.Println("log error:", err)
	}
	time.Sleep(gracefulCallTime)
	return s.name, nil
}

type slowClient struct {
	Work func(ctx context.Context, id string) (string, error)
}

func gracefulChild(address, name, port, logPath string) {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	svc := &slowSvc{name: name, log: f}
	// Nacos is a plugin; this child serves the embedded and the Nacos
	// variants, so it always adds it.
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithPlugins(nacos.Plugin(), zookeeper.Plugin()), weft.WithService("slow", svc),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
protocols: {dubbo: {port: %s}}
provider:
  shutdown: {wait: %d}
  services:
    slow: {interface: org.weft.Slow}
`, address, port, gracefulShutdownWait(address)))))
	if err == nil {
		err = app.Start(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	start := time.Now()
	err = app.Stop(context.Background())
	fmt.Printf("stopped in %v: %d calls executed, err %v\n", time.Since(start).Round(time.Millisecond), svc.calls.Load(), err)
	f.Close()
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// gracefulShutdownWait is shutdownWait with a wider margin for Nacos: on a
// loaded machine (2 cores, -race, other tests running) PolarisMesh's push
// reached the consumer 1.6 s and once more than 2.1 s after the SIGTERM,
// and a provider that stops before its consumers have heard of it refuses
// their calls, which failfast does not retry.
func gracefulShutdownWait(address string) int {
	switch {
	case strings.HasPrefix(address, "nacos:"):
		return 4000
	case strings.HasPrefix(address, "zookeeper:"):
		// A watch fires within milliseconds; the margin is for a loaded
		// machine's scheduling.
		return 1000
	}
	return shutdownWait(address)
}

// gracefulProvider is a started child.
type gracefulProvider struct {
	name, port, log string
	cmd             *exec.Cmd
	lines           chan string // its stdout after "ready", closed at EOF
}

func startGracefulProvider(t *testing.T, address, name string) *gracefulProvider {
	t.Helper()
	addr := freePort(t)
	p := &gracefulProvider{name: name, port: addr[strings.LastIndexByte(addr, ':')+1:],
		log: t.TempDir() + "/" + name + ".ids", lines: make(chan string, 16)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), gracefulChildEnv+"="+address, gracefulNameEnv+"="+name,
		gracefulPortEnv+"="+p.port, gracefulLogEnv+"="+p.log,
		// Under -race the child would sleep 1 s at exit: its exit time
		// is one of the figures logged.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	r := bufio.NewReader(out)
	line, _ := r.ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("provider %s: %q", name, line)
	}
	go func() {
		defer close(p.lines)
		for {
			line, err := r.ReadString('\n')
			if line = strings.TrimSpace(line); line != "" {
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// ids reads the call ids the provider started.
func (p *gracefulProvider) ids(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestGracefulStopEmbeddedRegistry: 16 callers of a 200 ms method over two
// providers found through the embedded registry; one provider is stopped
// with SIGTERM in the middle. No call fails, none runs twice.
func TestGracefulStopEmbeddedRegistry(t *testing.T) {
	for _, cl := range []string{"failover", "failfast"} {
		t.Run(cl, func(t *testing.T) {
			gracefulStopThroughRegistry(t, "embedded://"+t.TempDir()+"?heartbeat=200", cl)
		})
	}
}

// TestGracefulStopNacosRegistry: the same through Nacos (PolarisMesh in CI,
// started by .ci/run).
func TestGracefulStopNacosRegistry(t *testing.T) {
	addr := nacosAddr(t) // skips without a server, fails under CI
	for _, cl := range []string{"failover", "failfast"} {
		t.Run(cl, func(t *testing.T) {
			// A namespace of its own keeps runs apart on a shared server.
			gracefulStopThroughRegistry(t, fmt.Sprintf("nacos://%s?namespace=weft-graceful-%d", addr, time.Now().UnixNano()), cl)
		})
	}
}

type gracefulCall struct {
	id         string
	start, end time.Time
	who        string
	err        error
}

func gracefulStopThroughRegistry(t *testing.T, address, cl string) {
	a := startGracefulProvider(t, address, "a")
	b := startGracefulProvider(t, address, "b")
	ref := "cluster: failfast"
	if cl == "failover" {
		ref = "cluster: failover, retries: 2"
	}
	var c slowClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithPlugins(nacos.Plugin(), zookeeper.Plugin()), weft.WithReference("slow", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer:
  references:
    slow: {interface: org.weft.Slow, timeout: %d, %s}
`, address, gracefulTimeout.Milliseconds(), ref))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())

	// Both providers known: a few calls at once until each has answered.
	var seq atomic.Int64
	seen := map[string]bool{}
	deadline := time.Now().Add(15 * time.Second)
	for !seen["a"] || !seen["b"] {
		if time.Now().After(deadline) {
			t.Fatalf("within 15 s the consumer saw %v, want a and b", seen)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if who, err := c.Work(context.Background(), "w"+strconv.FormatInt(seq.Add(1), 10)); err == nil {
					mu.Lock()
					seen[who] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}

	// The consumer's connections to b, and when they leave ESTABLISHED.
	bPort, _ := strconv.ParseUint(b.port, 10, 16)
	conns := gracefulConns(uint16(bPort))
	if len(conns) == 0 {
		t.Fatalf("no established connection to b (port %d) in /proc/net/tcp", bPort)
	}

	var mu sync.Mutex
	var calls []gracefulCall
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range gracefulCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Staggered, so that calls start all the time rather than in
			// waves: whenever the consumer hears of the unregistration,
			// some calls on b have just been sent.
			time.Sleep(time.Duration(i) * gracefulCallTime / gracefulCallers)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := gracefulCall{id: strconv.FormatInt(seq.Add(1), 10), start: time.Now()}
				r.who, r.err = c.Work(context.Background(), r.id)
				r.end = time.Now()
				mu.Lock()
				calls = append(calls, r)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)

	sigterm := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	type exit struct {
		at  time.Time
		err error
	}
	exited := make(chan exit, 1)
	var bOut []string
	go func() {
		// Wait closes stdout: read it to the end first.
		for line := range b.lines {
			bOut = append(bOut, line)
		}
		err := b.cmd.Wait()
		exited <- exit{time.Now(), err}
	}()
	closed := make(chan gracefulClose, 1)
	watchDone := make(chan struct{})
	go func() { closed <- gracefulWatchClose(uint16(bPort), conns, watchDone) }()

	// Calls go on for at least 2.5 s after the SIGTERM, and 500 ms past b's exit.
	var bExit exit
	select {
	case bExit = <-exited:
	case <-time.After(20 * time.Second):
		t.Errorf("b still runs 20 s after SIGTERM")
		b.cmd.Process.Kill()
		bExit = <-exited
	}
	if wait := time.Until(sigterm.Add(2500 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	if wait := time.Until(bExit.at.Add(500 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	close(stop)
	wg.Wait()
	close(watchDone)
	cc := <-closed

	// Who ran what: ids started per provider.
	ranBy := map[string][]string{}
	for _, p := range []*gracefulProvider{a, b} {
		for _, id := range p.ids(t) {
			ranBy[id] = append(ranBy[id], p.name)
		}
	}
	ms := func(at time.Time) string {
		if at.IsZero() {
			return "never"
		}
		d := at.Sub(sigterm).Round(time.Millisecond)
		if d < 0 {
			return d.String()
		}
		return "+" + d.String()
	}
	var failed, after, fromB, lostRun, late int
	var lastStart, lastEnd, lastRanOnB, lastEndOnB, lastToB, lastFromB time.Time
	var errs []string
	for _, r := range calls {
		if contains(ranBy[r.id], "b") {
			if r.start.After(lastRanOnB) {
				lastRanOnB = r.start
			}
			if r.end.After(lastEndOnB) {
				lastEndOnB = r.end
			}
		}
		if !r.start.Before(sigterm) {
			after++
		}
		if r.start.After(lastStart) {
			lastStart = r.start
		}
		if r.end.After(lastEnd) {
			lastEnd = r.end
		}
		if r.err != nil {
			failed++
			if strings.Contains(r.err.Error(), "shutting down") {
				late++
			}
			if len(ranBy[r.id]) > 0 {
				lostRun++
			}
			if len(errs) < 10 {
				errs = append(errs, fmt.Sprintf("call %s (sent %s after SIGTERM): %v", r.id, ms(r.start), r.err))
			}
			continue
		}
		if r.who == "b" {
			fromB++
			if r.start.After(lastToB) {
				lastToB = r.start
			}
			if r.end.After(lastFromB) {
				lastFromB = r.end
			}
		}
		if !contains(ranBy[r.id], r.who) {
			t.Errorf("call %s answered by %s, which did not record it (ran by %v)", r.id, r.who, ranBy[r.id])
		}
	}
	var dups []string
	for id, by := range ranBy {
		if len(by) > 1 {
			dups = append(dups, id+" by "+strings.Join(by, "+"))
		}
	}
	sort.Strings(dups)

	t.Logf("%s, %s: %d calls (%d sent after SIGTERM, the last sent %s and ended %s), %d answered by b; %d failed (%d of them ran on a provider); %d ids ran twice",
		strings.SplitN(address, ":", 2)[0], cl, len(calls), after, ms(lastStart), ms(lastEnd),
		fromB, failed, lostRun, len(dups))
	t.Logf("after SIGTERM: last call run by b sent %s; last call answered by b sent %s and ended %s; consumer's connection to b left ESTABLISHED %s (%s), b exited %s; b said %q",
		ms(lastRanOnB), ms(lastToB), ms(lastFromB), ms(cc.at), cc.how, ms(bExit.at), bOut)

	for _, e := range errs {
		t.Log(e)
	}
	if failed != 0 {
		t.Errorf("%d of %d calls failed while a provider stopped gracefully", failed, len(calls))
		if late > 0 {
			t.Errorf("%d of them were refused by b as shutting down: the consumer heard of the unregistration only after b's provider.shutdown.wait (%d ms)",
				late, gracefulShutdownWait(address))
		}
	}
	if len(dups) != 0 {
		t.Errorf("%d calls ran twice: %v", len(dups), dups[:min(len(dups), 10)])
	}
	if bExit.err != nil {
		t.Errorf("the stopped provider exited with %v, want 0 (said %q)", bExit.err, bOut)
	}
	if d := lastEnd.Sub(sigterm); d < 2*time.Second {
		t.Errorf("calls went on only %v after the SIGTERM, want ≥ 2 s", d.Round(time.Millisecond))
	}
	if !lastEndOnB.After(sigterm) {
		t.Errorf("b ran no call in flight at its SIGTERM (the last it ran ended %s): the test proves nothing", ms(lastEndOnB))
	}
}

// gracefulSocket is a line of /proc/net/tcp{,6}.
type gracefulSocket struct {
	local, remote uint16
	state         string
}

var gracefulTCPStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

func gracefulSockets() []gracefulSocket {
	var out []gracefulSocket
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 {
				continue
			}
			port := func(s string) uint16 {
				i := strings.LastIndexByte(s, ':')
				p, _ := strconv.ParseUint(s[i+1:], 16, 16)
				return uint16(p)
			}
			st := gracefulTCPStates[fs[3]]
			if st == "" {
				st = fs[3]
			}
			out = append(out, gracefulSocket{local: port(fs[1]), remote: port(fs[2]), state: st})
		}
	}
	return out
}

// gracefulConns are the local ports of established connections to port.
func gracefulConns(port uint16) map[uint16]bool {
	out := map[uint16]bool{}
	for _, s := range gracefulSockets() {
		if s.remote == port && s.state == "ESTABLISHED" {
			out[s.local] = true
		}
	}
	return out
}

type gracefulClose struct {
	at  time.Time
	how string
}

// gracefulWatchClose polls until none of the consumer's connections to port (local
// ports conns) is ESTABLISHED; how tells which side closed first: the
// consumer's socket in FIN_WAIT/TIME_WAIT means the consumer did, in
// CLOSE_WAIT/LAST_ACK (or the provider's in TIME_WAIT) the provider did.
func gracefulWatchClose(port uint16, conns map[uint16]bool, done <-chan struct{}) gracefulClose {
	for {
		var states []string
		open := false
		for _, s := range gracefulSockets() {
			switch {
			case conns[s.local] && s.remote == port:
				states = append(states, "consumer "+s.state)
				open = open || s.state == "ESTABLISHED"
			case s.local == port && conns[s.remote]:
				states = append(states, "provider "+s.state)
			}
		}
		if !open {
			how := strings.Join(states, ", ")
			if how == "" {
				how = "gone"
			}
			return gracefulClose{time.Now(), how}
		}
		select {
		case <-done:
			return gracefulClose{how: "still ESTABLISHED when the calls stopped: " + strings.Join(states, ", ")}
		case <-time.After(2 * time.Millisecond):
		}
	}
}
