// Command dubbogo-echo runs the dubbo-go side of the weft benchmarks: a real
// dubbo-go v3.3.1 provider of org.weft.bench.EchoService, or a dubbo-go
// consumer that load-tests echo(String) on any provider of it (weft, dubbo-go
// or another). Classic dubbo protocol, hessian2, direct connection.
//
//	dubbogo-echo -mode provider -addr 127.0.0.1:20880
//	dubbogo-echo -mode bench -addr 127.0.0.1:20880 -c 64 -d 10s -size 128
//	dubbogo-echo -mode call -addr 127.0.0.1:20880 -msg hello
//
// With -tls-ca, -tls-cert and -tls-key, every connection of the process is
// dubbo-go's TLS (see dubbogo.UseTLS for what dubbo-go checks and does not).
// In call mode it makes one echo call and prints the reply on stdout, or the
// error on stderr with exit status 1.
//
// With -zk zookeeper://HOST:PORT?group=G, the provider also registers in
// that ZooKeeper (interface level, under /G, /dubbo without group) and a
// call finds its provider there instead of at -addr; -zk
// nacos://HOST:PORT?namespace=NS does the same in that Nacos namespace.
//
// In provider mode it prints "listening <addr>" on stdout once bound and runs
// until SIGINT or SIGTERM. In bench mode it prints a summary on stderr and, as
// the last line on stdout, one JSON object:
//
//	{"impl":"dubbo-go","addr":"...","concurrency":64,"duration_s":10,"size":128,
//	 "requests":N,"errors":N,"qps":F,"p50_us":F,"p90_us":F,"p99_us":F,"p999_us":F,
//	 "max_us":F,"first_error":"..."}
//
// Latencies are per call, measured around the consumer's blocking call.
// Errors (including a reply that differs from the payload) are counted, not
// timed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weftrpc/weft/test/interop/dubbogo"
)

func main() {
	var (
		mode     = flag.String("mode", "provider", "provider, bench or call")
		addr     = flag.String("addr", "127.0.0.1:20880", "provider address: where to listen (provider) or connect (bench)")
		conc     = flag.Int("c", 16, "bench: concurrent callers")
		dur      = flag.Duration("d", 10*time.Second, "bench: measured duration")
		warmup   = flag.Duration("warmup", time.Second, "bench: unmeasured warm-up before -d")
		size     = flag.Int("size", 128, "bench: payload bytes (a string of this many ASCII bytes)")
		timeout  = flag.Duration("timeout", dubbogo.DefaultTimeout, "bench: per-call timeout")
		logLevel = flag.String("log", "error", "dubbo-go log level: debug, info, warn, error")
		msg      = flag.String("msg", "hello", "call: the string to echo")
		tlsCA    = flag.String("tls-ca", "", "TLS: CA certificate file (PEM)")
		tlsCert  = flag.String("tls-cert", "", "TLS: this side's certificate file (PEM)")
		tlsKey   = flag.String("tls-key", "", "TLS: this side's key file (PEM)")
		zkURL    = flag.String("zk", "", "provider: also register in this registry; call: find the provider there (zookeeper://host:port?group=G or nacos://host:port?namespace=NS)")
	)
	flag.Parse()
	dubbogo.SetLogLevel(*logLevel)
	var err error
	if *tlsCA != "" || *tlsCert != "" || *tlsKey != "" {
		if err := dubbogo.UseTLS(*tlsCA, *tlsCert, *tlsKey); err != nil {
			fmt.Fprintln(os.Stderr, "dubbogo-echo:", err)
			os.Exit(2)
		}
	}
	switch *mode {
	case "call":
		target := *addr
		if *zkURL != "" {
			target = *zkURL
		}
		err = call(target, *msg, *timeout)
	case "provider":
		err = provide(*addr, *zkURL)
	case "bench":
		err = bench(*addr, *conc, *warmup, *dur, *size, *timeout)
	default:
		err = fmt.Errorf("unknown -mode %q (want provider, bench or call)", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbogo-echo:", err)
		os.Exit(1)
	}
}

func provide(addr, zkURL string) error {
	var opts []dubbogo.ProviderOption
	if zkURL != "" {
		u, err := url.Parse(zkURL)
		switch {
		case err == nil && u.Scheme == "zookeeper":
			opts = append(opts, dubbogo.WithProviderZookeeper(u.Host, u.Query().Get("group")))
		case err == nil && u.Scheme == "nacos":
			opts = append(opts, dubbogo.WithProviderNacos(u.Host, u.Query().Get("namespace")))
		default:
			return fmt.Errorf("-zk %q: want zookeeper://host:port?group=G or nacos://host:port?namespace=NS", zkURL)
		}
	}
	stop, err := dubbogo.StartProvider(addr, opts...)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	stop()
	fmt.Fprintf(os.Stderr, "stopped; echo=%d getUser=%d fail=%d\n",
		dubbogo.EchoCalls.Load(), dubbogo.GetUserCalls.Load(), dubbogo.FailCalls.Load())
	return nil
}

func call(addr, msg string, timeout time.Duration) error {
	c, err := dubbogo.NewClient(addr, dubbogo.WithTimeout(timeout))
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := c.Echo(context.Background(), msg)
	if err != nil {
		return err
	}
	fmt.Println(got)
	return nil
}

type result struct {
	Impl        string  `json:"impl"`
	Addr        string  `json:"addr"`
	Concurrency int     `json:"concurrency"`
	DurationS   float64 `json:"duration_s"`
	Size        int     `json:"size"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	QPS         float64 `json:"qps"`
	P50us       float64 `json:"p50_us"`
	P90us       float64 `json:"p90_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	FirstError  string  `json:"first_error,omitempty"`
}

func bench(addr string, conc int, warmup, dur time.Duration, size int, timeout time.Duration) error {
	if conc < 1 || dur <= 0 || size < 0 {
		return fmt.Errorf("need -c >= 1, -d > 0, -size >= 0")
	}
	c, err := dubbogo.NewClient(addr, dubbogo.WithTimeout(timeout))
	if err != nil {
		return err
	}
	defer c.Close()
	payload := strings.Repeat("x", size)
	ctx := context.Background()

	type worker struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	workers := make([]worker, conc)
	var wg sync.WaitGroup
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(dur)
	for i := range workers {
		w := &workers[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				got, err := c.Echo(ctx, payload)
				t1 := time.Now()
				if err == nil && got != payload {
					err = fmt.Errorf("echo returned %d bytes, sent %d", len(got), len(payload))
				}
				if t0.Before(measureFrom) || t1.After(end) {
					continue // warm-up, or straddling the end
				}
				if err != nil {
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.lat = append(w.lat, t1.Sub(t0))
			}
		}()
	}
	wg.Wait()

	r := result{Impl: "dubbo-go", Addr: addr, Concurrency: conc, DurationS: dur.Seconds(), Size: size}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		r.Errors += w.errs
		if w.firstErr != nil && r.FirstError == "" {
			r.FirstError = w.firstErr.Error()
		}
	}
	slices.Sort(all)
	r.Requests = len(all) + r.Errors
	r.QPS = float64(len(all)) / dur.Seconds()
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return float64(all[i].Nanoseconds()) / 1e3
	}
	r.P50us, r.P90us, r.P99us, r.P999us = pct(0.50), pct(0.90), pct(0.99), pct(0.999)
	if len(all) > 0 {
		r.MaxUs = float64(all[len(all)-1].Nanoseconds()) / 1e3
	}
	fmt.Fprintf(os.Stderr, "dubbo-go -> %s: c=%d size=%d %v: %.0f qps, p50 %.0fus p90 %.0fus p99 %.0fus p999 %.0fus, %d errors\n",
		addr, conc, size, dur, r.QPS, r.P50us, r.P90us, r.P99us, r.P999us, r.Errors)
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return nil
}
