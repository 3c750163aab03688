// Command weft runs weft applications composed from config files.
//
//	weft run -c weft.yaml [-c override.yaml ...]   compose and run until SIGINT/SIGTERM
//	weft run --check -c weft.yaml                  check it all, free ports included, and exit
//	weft wasm check FILE.wasm                      check a WASM filter module (weft ABI v1 or proxy-wasm)
//	weft ls REGISTRY_URL                           list a registry's services and providers
//	weft qos HOST:PORT COMMAND [ARGS]              run a QoS command (ls, offline, ready, ...) on an App
//	weft version                                   print the version
//
// The implementations weft run can export are those linked into this binary
// (the examples' services); a program of your own exports yours the same way
// with weft.New and weft.WithService. weft run also has the plugins a
// program adds itself with weft.WithPlugins: Nacos (registry-nacos) and
// ZooKeeper (registry-zookeeper), each as registry and config center.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/echo/echoservice"
	"github.com/weftrpc/weft/apps/examples/quickstart/greeter"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	nacos "github.com/weftrpc/weft/registry-nacos"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage:
  weft run -c FILE [-c FILE...]   compose the App the config files describe and run it
                                  (--check: check everything, ports included, and exit)
  weft invoke URL METHOD '[ARGS]'  make one generic call to a Dubbo provider, print the result as JSON
  weft bench [flags] [URL]        load a Dubbo echo endpoint: qps and latency percentiles
  weft ls REGISTRY_URL            list the services a registry holds and their providers
  weft wasm check FILE.wasm       check a WASM filter module (weft ABI v1 or proxy-wasm; exit 1 if invalid)
  weft qos HOST:PORT CMD [ARGS]   run a QoS command on an App (ls, ps, online, offline, ready...; -h for the list)
  weft version                    print weft's version`)
}

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

func cli(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version":
		fmt.Fprintf(stdout, "weft %s %s %s/%s\n", weft.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "run":
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(stderr)
		var cfg files
		fs.Var(&cfg, "c", "config file (repeat to merge several, in order)")
		check := fs.Bool("check", false, "check everything (files, names, values, WASM modules, free ports) and exit without starting")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if len(cfg) == 0 {
			fmt.Fprintln(stderr, "weft run: give at least one config file with -c")
			return 2
		}
		// New fails on a config with nothing to export or refer (and on
		// any other config error), naming what is missing.
		app, err := weft.New(append(builtinServices(), weft.WithPlugins(builtinPlugins()...), weft.WithConfig(weft.ConfigFiles(cfg...)...))...)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		c := app.Config()
		if *check {
			return checkRun(c, cfg, stdout, stderr)
		}
		app.Logger().Info("weft run: starting", "config", cfg.String(),
			"services", strings.Join(slices.Sorted(maps.Keys(c.Provider.Services)), ","),
			"references", strings.Join(slices.Sorted(maps.Keys(c.Consumer.References)), ","))
		if err := app.Run(context.Background()); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	case "invoke":
		return invoke(args[1:], stdout, stderr)
	case "bench":
		return bench(args[1:], stdout, stderr)
	case "wasm":
		return wasmCmd(args[1:], stdout, stderr)
	case "ls":
		return ls(args[1:], stdout, stderr)
	case "qos":
		return qosCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "weft: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

// checkRun is weft run --check after New accepted the config: New has
// checked every key, value and name and compiled the WASM modules; what
// only starting would find is a port another process holds, so each fixed
// one is tried.
func checkRun(c *weft.Config, cfg files, stdout, stderr io.Writer) int {
	bad := 0
	for _, l := range c.Listeners() {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			fmt.Fprintf(stderr, "weft run --check: %s: cannot listen on %s: %v\n", l.Key, l.Addr, err)
			bad++
			continue
		}
		ln.Close()
	}
	if bad > 0 {
		return 1
	}
	fmt.Fprintf(stdout, "weft run --check: %s: ok (services: %s; references: %s; WASM filters: %s)\n", cfg.String(),
		orNone(slices.Sorted(maps.Keys(c.Provider.Services))), orNone(slices.Sorted(maps.Keys(c.Consumer.References))),
		orNone(slices.Sorted(maps.Keys(c.Wasm.Filters))))
	return 0
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// builtinPlugins are the opt-in integrations weft run carries, so that a
// config can name them as a program of its own would after adding them.
func builtinPlugins() []weft.Plugin {
	return []weft.Plugin{nacos.Plugin(), zookeeper.Plugin()}
}

// builtinServices registers the implementations this binary carries, by the
// names a config's `ref` uses.
func builtinServices() []weft.Option {
	hessian2.RegisterPOJO(&echoservice.User{})
	return []weft.Option{
		weft.WithService("greeter", greeter.Greeter{}),
		weft.WithService("echo", &echoservice.Service{}),
	}
}
