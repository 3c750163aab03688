// Command bench compares, interleaved in one run on this machine, three
// systems on a 1 KiB echo: weft (`weft bench` against the weft echo
// provider, one connection), dubbo-go (its consumer against its provider,
// classic dubbo protocol, hessian2), and raw Go TCP with the same frame sizes
// (the floor the machine allows). Each round runs every system at every
// concurrency, in rotating order, so drift on a shared machine hits all of
// them alike; the table shows the median of the rounds.
//
//	go run ./test/bench -rounds 3 -d 5s
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

type result struct {
	System      string  `json:"system"`
	Concurrency int     `json:"concurrency"`
	QPS         float64 `json:"qps"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	Errors      uint64  `json:"errors"`
	// dubbogo-echo reports microseconds.
	P50us  float64 `json:"p50_us"`
	P90us  float64 `json:"p90_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
}

func main() {
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	dur := flag.Duration("d", 5*time.Second, "measured duration of each run")
	size := flag.Int("size", 1024, "payload bytes")
	concList := flag.String("c", "1,16,100", "concurrencies")
	systems := flag.String("systems", "weft,dubbo-go,rawtcp", "systems to run")
	flag.Parse()
	if err := run(*rounds, *dur, *size, *concList, strings.Split(*systems, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func root() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/weftrpc/weft").Output()
	if err != nil {
		return "."
	}
	return strings.TrimSpace(string(out))
}

// build builds pkg from the module in dir against that module's own go.mod
// (test/interop is outside the repository's workspace).
func build(dir, out string, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

type system struct {
	name   string
	server *exec.Cmd
	client func(c int) *exec.Cmd
}

func run(rounds int, dur time.Duration, size int, concList string, names []string) error {
	top := root()
	bin, err := os.MkdirTemp("", "weft-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	fmt.Fprintln(os.Stderr, "bench: building")
	if err := build(filepath.Join(top, "apps", "weft"), filepath.Join(bin, "weft"), "."); err != nil {
		return err
	}
	if err := build(top, filepath.Join(bin, "echo"), "./apps/examples/echo"); err != nil {
		return err
	}
	if err := build(filepath.Join(top, "test"), filepath.Join(bin, "rawtcp"), "./bench/rawtcp"); err != nil {
		return err
	}
	if err := build(filepath.Join(top, "test", "interop"), filepath.Join(bin, "dubbogo-echo"), "./cmd/dubbogo-echo"); err != nil {
		return err
	}
	d := dur.String()
	sz := strconv.Itoa(size)
	all := map[string]*system{}
	weftAddr, dgAddr, rawAddr := freeAddr(), freeAddr(), freeAddr()
	all["weft"] = &system{name: "weft",
		server: exec.Command(filepath.Join(bin, "echo"), "-addr", weftAddr),
		client: func(c int) *exec.Cmd {
			return exec.Command(filepath.Join(bin, "weft"), "bench", "-json", "-c", strconv.Itoa(c), "-d", d, "-size", sz,
				"dubbo://"+weftAddr+"/org.weft.bench.EchoService")
		}}
	all["dubbo-go"] = &system{name: "dubbo-go",
		server: exec.Command(filepath.Join(bin, "dubbogo-echo"), "-mode", "provider", "-addr", dgAddr),
		client: func(c int) *exec.Cmd {
			return exec.Command(filepath.Join(bin, "dubbogo-echo"), "-mode", "bench", "-addr", dgAddr, "-c", strconv.Itoa(c), "-d", d, "-size", sz)
		}}
	all["rawtcp"] = &system{name: "rawtcp",
		server: exec.Command(filepath.Join(bin, "rawtcp"), "-mode", "server", "-addr", rawAddr),
		client: func(c int) *exec.Cmd {
			return exec.Command(filepath.Join(bin, "rawtcp"), "-mode", "client", "-addr", rawAddr, "-c", strconv.Itoa(c), "-d", d, "-size", sz)
		}}
	var chosen []*system
	for _, n := range names {
		s, ok := all[strings.TrimSpace(n)]
		if !ok {
			return fmt.Errorf("unknown system %q", n)
		}
		chosen = append(chosen, s)
	}
	addrs := map[string]string{"weft": weftAddr, "dubbo-go": dgAddr, "rawtcp": rawAddr}
	for _, s := range chosen {
		s.server.Stderr = os.Stderr
		if err := s.server.Start(); err != nil {
			return err
		}
		defer func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }(s.server)
		if err := waitListening(addrs[s.name]); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	var concs []int
	for _, c := range strings.Split(concList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			return err
		}
		concs = append(concs, n)
	}
	results := map[string][]result{}
	for r := 0; r < rounds; r++ {
		for _, c := range concs {
			for i := range chosen {
				s := chosen[(i+r)%len(chosen)]
				cmd := s.client(c)
				var out bytes.Buffer
				cmd.Stdout = &out
				cmd.Stderr = os.Stderr
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("%s c=%d: %w", s.name, c, err)
				}
				lines := strings.Split(strings.TrimSpace(out.String()), "\n")
				var res result
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
					return fmt.Errorf("%s c=%d: bad output %q: %w", s.name, c, out.String(), err)
				}
				res.System, res.Concurrency = s.name, c
				if res.P50Ms == 0 && res.P50us > 0 {
					res.P50Ms, res.P90Ms, res.P99Ms, res.P999Ms = res.P50us/1000, res.P90us/1000, res.P99us/1000, res.P999us/1000
				}
				key := fmt.Sprintf("%s/%d", s.name, c)
				results[key] = append(results[key], res)
				fmt.Fprintf(os.Stderr, "round %d %-8s c=%-3d %9.0f qps p99 %.2f ms errors %d\n", r+1, s.name, c, res.QPS, res.P99Ms, res.Errors)
			}
		}
	}
	fmt.Printf("\n%d B echo, %d rounds of %v, median per cell\n\n", size, rounds, dur)
	fmt.Printf("| system | c | qps | p50 ms | p90 ms | p99 ms | p999 ms | errors |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range concs {
		for _, s := range chosen {
			m := median(results[fmt.Sprintf("%s/%d", s.name, c)])
			fmt.Printf("| %s | %d | %.0f | %.3f | %.3f | %.3f | %.3f | %d |\n", s.name, c, m.QPS, m.P50Ms, m.P90Ms, m.P99Ms, m.P999Ms, m.Errors)
		}
	}
	return nil
}

// median picks the run with the median qps (its latencies come with it).
func median(rs []result) result {
	if len(rs) == 0 {
		return result{}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].QPS < rs[j].QPS })
	return rs[len(rs)/2]
}
