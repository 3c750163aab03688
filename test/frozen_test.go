package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/proxy"
	netty "github.com/weftrpc/weft/transport-netty"
)

const childEnv = "WEFTTEST_FROZEN_PROVIDER_ADDR"

type echoSvc struct{}

func (echoSvc) Echo(_ context.Context, s string) (string, error) { return s, nil }

// The child process: a dubbo provider that prints "ready" and serves until
// killed. The parent freezes it with SIGSTOP.
func TestMain(m *testing.M) {
	gracefulChildMain()
	if spec := os.Getenv(registryChildEnv); spec != "" {
		registryChild(spec)
	}
	if addr := os.Getenv(childEnv); addr != "" {
		p := dubbo.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
		u := kernel.MustParseURL("dubbo://" + addr + "/org.weft.Echo?interface=org.weft.Echo")
		inv, err := proxy.NewServiceInvoker(u, echoSvc{})
		if err == nil {
			_, err = p.Export(context.Background(), inv)
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		select {}
	}
	code := m.Run()
	removeGuests()
	os.Exit(code)
}

func freePort(t testing.TB) string {
	// A port the kernel hands out with :0 comes from the ephemeral range,
	// where any outgoing connection (of this or another test process) may
	// take it before the test binds it again: seen under load as "address
	// already in use". So pick below that range, where only listeners go.
	lo, _ := ephemeralRange()
	for range 50 {
		if lo <= 21000 {
			break
		}
		port := 20000 + rand.IntN(lo-20000)
		if port == 20880 || port == 22222 { // Dubbo's and QoS's defaults
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ephemeralRange is Linux's range of ports for outgoing connections
// (32768..60999 by default), or 0, 0 where it cannot be read.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	lo, _ = strconv.Atoi(f[0])
	hi, _ = strconv.Atoi(f[1])
	return lo, hi
}

func startChild(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child provider: %q", line)
	}
	return addr, cmd
}

// waitStopped waits until the kernel reports the process stopped: a signal
// is delivered asynchronously, and a call sent before it lands is answered.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'T' {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop", pid)
}

type clientsOf interface {
	Clients() []*netty.ExchangeClient
}

// frozenTimeout is the consumer's timeout in the frozen-provider tests.
const frozenTimeout = 200 * time.Millisecond

// frozenPair starts two child providers, refers both over dubbo (warmed up)
// and joins them in a failover cluster with retries 2 and frozenTimeout;
// it returns the children, the invokers and the cluster.
func frozenPair(t *testing.T) ([2]*exec.Cmd, []kernel.Invoker, kernel.Invoker) {
	t.Helper()
	var children [2]*exec.Cmd
	p := dubbo.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(p.Destroy)
	var invokers []kernel.Invoker
	for i := range children {
		var addr string
		addr, children[i] = startChild(t)
		iv, err := p.Refer(context.Background(), kernel.MustParseURL("dubbo://"+addr+"/org.weft.Echo?interface=org.weft.Echo"))
		if err != nil {
			t.Fatal(err)
		}
		invokers = append(invokers, iv)
	}
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", cluster.Random)
	lbs.Register(cluster.Random, func() (extension.LoadBalance, error) { return cluster.NewRandom(), nil }, nil)
	consumer := kernel.MustParseURL(fmt.Sprintf("consumer://127.0.0.1/org.weft.Echo?retries=2&timeout=%d", frozenTimeout.Milliseconds()))
	failover, _ := cluster.NewFailover(lbs, slog.New(slog.NewTextHandler(io.Discard, nil))).Join(cluster.NewStaticDirectory(consumer, invokers, nil))
	for _, iv := range invokers {
		if res, err := iv.Invoke(context.Background(), kernel.NewInvocation("echo", "warm")); err != nil || res.Value != "warm" {
			t.Fatalf("before freezing: %v %v", res.Value, err)
		}
	}
	return children, invokers, failover
}

// freeze stops a child provider with SIGSTOP and waits until it is stopped.
func freeze(t *testing.T, child *exec.Cmd) {
	t.Helper()
	child.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, child.Process.Pid)
}

// A provider frozen with SIGSTOP keeps its connections open but never
// answers: every try must fail at its own deadline (a failover call after
// its three tries, or at the caller's deadline), and leave nothing in the
// pending tables.
func TestFrozenProviderCallsFailAtTimeout(t *testing.T) {
	children, invokers, failover := frozenPair(t)
	const timeout = frozenTimeout
	freeze(t, children[0])
	freeze(t, children[1])

	// Each deadline a call waits on may fire late by the scheduler's delay
	// (both cores loaded, -race): 20 ms of slack per deadline, so a
	// failover call that waits on three tries' deadlines in turn gets 60.
	const slack = 20 * time.Millisecond
	type outcome struct {
		took, want, slack time.Duration
		err               error
	}
	var wg sync.WaitGroup
	results := make(chan outcome, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var err error
			want, deadlines := timeout, time.Duration(1)
			switch i % 4 {
			case 0:
				// Through failover: each try has its own timeout, as in
				// Dubbo, so three tries on frozen providers take three.
				_, err = failover.Invoke(context.Background(), kernel.NewInvocation("echo", "x"))
				want, deadlines = 3*timeout, 3
			case 2:
				// The caller's deadline bounds the call, retries included.
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_, err = failover.Invoke(ctx, kernel.NewInvocation("echo", "x"))
				cancel()
			default:
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_, err = invokers[i%4/2].Invoke(ctx, kernel.NewInvocation("echo", "x"))
				cancel()
			}
			results <- outcome{time.Since(start), want, deadlines * slack, err}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if kernel.CodeOf(r.err) != kernel.CodeTimeout {
			t.Errorf("call ended with %v, want a timeout", r.err)
		}
		if r.took < r.want || r.took > r.want+r.slack {
			t.Errorf("call failed after %v, want within [%v, %v]", r.took, r.want, r.want+r.slack)
		}
	}
	for _, iv := range invokers {
		for _, c := range iv.(clientsOf).Clients() {
			if n := c.Pending(); n != 0 {
				t.Errorf("pending table of %s holds %d calls", c.URL().Address(), n)
			}
		}
	}
}

// One provider of two frozen with SIGSTOP: failover gets past it, because
// each try has its own timeout (Dubbo's behaviour). Before, one deadline
// covered all tries, the frozen try ate it, and about half the calls
// failed (20 of 40 sequential ones).
func TestFailoverGetsPastAFrozenProvider(t *testing.T) {
	children, _, failover := frozenPair(t)
	const timeout = frozenTimeout
	freeze(t, children[0])
	slow := 0
	for i := range 40 {
		start := time.Now()
		res, err := failover.Invoke(context.Background(), kernel.NewInvocation("echo", "x"))
		took := time.Since(start)
		if err != nil || res.Value != "x" {
			t.Fatalf("call %d failed after %v with one provider frozen: %v", i, took, err)
		}
		// At most one try on the frozen provider: its timeout plus the
		// healthy provider's answer.
		if took > timeout+100*time.Millisecond {
			t.Errorf("call %d took %v, want at most %v plus the healthy provider's time", i, took, timeout)
		}
		if took >= timeout {
			slow++
		}
	}
	t.Logf("%d of 40 calls tried the frozen provider first", slow)
	if slow == 0 {
		t.Error("no call tried the frozen provider: the test did not exercise failover (random balancing)")
	}
}
