package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const qosUsage = `usage: weft qos [-timeout D] HOST:PORT COMMAND [ARGS...]

Runs one command on an App's QoS port (qos.port, Dubbo's 22222 by default)
over HTTP, prints the answer, and exits 0 when the App answered 200 (so
"weft qos 127.0.0.1:22222 ready" can gate a script), 1 otherwise.

Commands (Dubbo's; "help" asks the App for its list):
  help [COMMAND]     the commands the App knows
  ls                 services with their addresses and registries, references with their providers
  ps                 the ports the App listens on
  offline [SERVICE]  unregister SERVICE (id, interface, service key or pattern; all without one)
                     from every registry without stopping it
  online [SERVICE]   register it again
  ready | live | startup   Kubernetes' probes: true (200) or false (503)

The same port speaks telnet (telnet 127.0.0.1 22222, then ls at dubbo>) and
plain HTTP (curl http://127.0.0.1:22222/offline?service=org.example.Greeter).
HOST:PORT may be a bare port, meaning 127.0.0.1.

Flags:
  -timeout D   give up after D (default 40s: online and offline wait on the registries up to 30s)
  -h, -help    print this help and exit 0

Exit status: 0 answered 200, 1 another answer or unreachable, 2 usage error.
`

// qosCmd is `weft qos HOST:PORT CMD [ARGS]`: one QoS command over HTTP,
// whose query values the server takes as the command's arguments.
func qosCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weft qos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, qosUsage) }
	timeout := fs.Duration("timeout", 40*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() < 2 {
		fmt.Fprintf(stderr, "weft qos: want HOST:PORT and a command, got %d arguments\n", fs.NArg())
		fs.Usage()
		return 2
	}
	addr := fs.Arg(0)
	if !strings.Contains(addr, ":") {
		addr = net.JoinHostPort("127.0.0.1", addr)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		fmt.Fprintf(stderr, "weft qos: %q is not HOST:PORT: %v\n", fs.Arg(0), err)
		return 2
	}
	var query []string
	for _, a := range fs.Args()[2:] {
		query = append(query, url.QueryEscape(a))
	}
	u := (&url.URL{Scheme: "http", Host: addr, Path: "/" + fs.Arg(1), RawQuery: strings.Join(query, "&")}).String()
	c := &http.Client{Timeout: *timeout}
	resp, err := c.Get(u)
	if err != nil {
		fmt.Fprintf(stderr, "weft qos: cannot reach the QoS port at %s: %v\n(is the App running with qos.enable, on that port? A remote host needs qos.accept_foreign_ip: true)\n", addr, err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, io.LimitReader(resp.Body, 64<<20)); err != nil {
		fmt.Fprintf(stderr, "weft qos: reading the answer from %s: %v\n", addr, err)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "weft qos: %s answered %s\n", addr, resp.Status)
		return 1
	}
	return 0
}
