// Command echo serves org.weft.bench.EchoService over the Dubbo protocol, for
// benchmarks and for any Dubbo client (Java Dubbo, dubbo-go, weft), and with
// -tri the protobuf weftbench.echo.EchoService over Triple, for any gRPC
// client (grpc-go's load generator in ../shared/peers, grpcurl):
//
//	go run ./apps/examples/echo -addr 127.0.0.1:20880 -tri 127.0.0.1:50051
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
	"github.com/weftrpc/weft/apps/examples/echo/echopb"
	"github.com/weftrpc/weft/apps/examples/echo/echoservice"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:20880", "address to listen on")
	threads := flag.Int("threads", 200, "concurrent calls served (Dubbo's threads)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file until exit")
	triAddr := flag.String("tri", "", "also serve weftbench.echo.EchoService (protobuf) over Triple on this address")
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
	protocols := fmt.Sprintf("  dubbo: {host: %q, port: %d, threads: %d}\n", host, p, *threads)
	services := fmt.Sprintf("    echo: {interface: %s, protocol: dubbo}\n", echoservice.Interface)
	opts := []weft.Option{weft.WithService("echo", &echoservice.Service{})}
	if *triAddr != "" {
		th, tp, err := net.SplitHostPort(*triAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo: -tri:", err)
			os.Exit(2)
		}
		protocols += fmt.Sprintf("  tri: {host: %q, port: %s, threads: %d}\n", th, tp, *threads)
		// The hessian2 service on both protocols (Triple carries it as
		// Dubbo 3's non-IDL calls), and its protobuf twin on Triple.
		services = fmt.Sprintf("    echo: {interface: %s, protocol: \"dubbo,tri\"}\n", echoservice.Interface)
		services += "    pbecho: {interface: " + echopb.EchoServiceName + ", protocol: tri}\n"
		opts = append(opts, weft.WithService("pbecho", protoEcho{}))
	}
	cfg := "application: {name: weft-echo}\nprotocols:\n" + protocols + "provider:\n  services:\n" + services
	app, err := weft.New(append(opts, weft.WithConfig(weft.ConfigYAML(cfg)))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "echo: serving %s on dubbo://%s\n", echoservice.Interface, *addr)
	if *triAddr != "" {
		fmt.Fprintf(os.Stderr, "echo: serving %s and weftbench.echo.EchoService on tri://%s\n", echoservice.Interface, *triAddr)
	}
	if err := app.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// protoEcho is weftbench.echo.EchoService: a Go method on the generated
// messages is all a Triple service needs (echopb.EchoServiceServer, from
// protoc-gen-weft, says which).
type protoEcho struct{}

var _ echopb.EchoServiceServer = protoEcho{}

func (protoEcho) Echo(_ context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) {
	return &echopb.EchoReply{Msg: in.GetMsg()}, nil
}
