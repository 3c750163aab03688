// Command echo serves org.weft.bench.EchoService over the Dubbo protocol, for
// benchmarks and for any Dubbo client (Java Dubbo, dubbo-go, weft):
//
//	go run ./apps/examples/echo -addr 127.0.0.1:20880
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/echo/echoservice"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:20880", "address to listen on")
	threads := flag.Int("threads", 200, "concurrent calls served (Dubbo's threads)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file until exit")
	traceOut := flag.String("trace", "", "write an execution trace to this file until exit (go tool trace)")
	flag.Parse()
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		trace.Start(f)
		defer trace.Stop()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo: -addr:", err)
		os.Exit(2)
	}
	p, _ := strconv.Atoi(port)
	hessian2.RegisterPOJO(&echoservice.User{})
	app, err := weft.New(
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: weft-echo}
protocols:
  dubbo: {host: %q, port: %d, threads: %d}
provider:
  services:
    echo: {interface: %s}
`, host, p, *threads, echoservice.Interface))),
		weft.WithService("echo", &echoservice.Service{}),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "echo: serving %s on dubbo://%s\n", echoservice.Interface, *addr)
	if err := app.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
