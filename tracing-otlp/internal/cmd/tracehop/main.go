// Command tracehop is a weft App in a process of its own for the
// cross-process tracing test (test/interop): it exports
// org.weft.bench.EchoService, whose echo calls org.weft.trace.End at -next
// from inside the call, and sends its spans over OTLP/HTTP to -otlp. It
// prints "listening ADDR" once it serves and runs until SIGTERM, when
// stopping the App flushes the spans.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/weftrpc/weft"
	otlp "github.com/weftrpc/weft/tracing-otlp"
)

type endClient struct {
	Echo func(ctx context.Context, s string) (string, error)
}

// hop forwards echo to the next provider with the call's context, so the
// call's span is the parent of the next call's.
type hop struct{ next *endClient }

func (h hop) Echo(ctx context.Context, s string) (string, error) { return h.next.Echo(ctx, s) }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to serve")
	next := flag.String("next", "", "dubbo URL of org.weft.trace.End")
	endpoint := flag.String("otlp", "", "OTLP/HTTP traces URL, http://HOST:PORT/v1/traces")
	flag.Parse()
	if *next == "" || *endpoint == "" {
		fmt.Fprintln(os.Stderr, "tracehop: -next and -otlp are required")
		os.Exit(2)
	}
	_, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracehop:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr) // a free port, when 0, known before the App binds it
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracehop:", err)
		os.Exit(1)
	}
	if port == "0" {
		_, port, _ = net.SplitHostPort(ln.Addr().String())
	}
	ln.Close()
	c := &endClient{}
	app, err := weft.New(weft.WithoutEnv(), weft.WithPlugins(otlp.Plugin()),
		weft.WithService("echo", hop{c}), weft.WithReference("end", c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: weft-hop}
qos: {enable: false}
tracing: {enable: true, exporter: {type: otlp-http, endpoint: %q, timeout: 5000}}
protocols: {dubbo: {port: %s}}
provider: {services: {echo: {interface: org.weft.bench.EchoService}}}
consumer: {references: {end: {interface: org.weft.trace.End, url: %q, retries: 0}}}
`, *endpoint, port, strings.TrimSpace(*next)))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracehop:", err)
		os.Exit(1)
	}
	if err := app.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "tracehop:", err)
		os.Exit(1)
	}
	fmt.Printf("listening 127.0.0.1:%s\n", port)
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-sig.Done()
	// Stopping the App flushes its spans to the receiver.
	if err := app.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "tracehop:", err)
		os.Exit(1)
	}
}
