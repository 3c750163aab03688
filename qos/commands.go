package qos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// result is a command's answer: its text, the HTTP status it maps to, and
// for quit that the telnet session ends.
type result struct {
	status int
	text   string
	quit   bool
}

func ok(text string) result { return result{status: http.StatusOK, text: text} }

type command struct {
	name, args, help string
	run              func(ctx context.Context, s *Server, args []string) result
	// private: only a client on the App's machine may run it (Dubbo 3's
	// PRIVATE permission level, which anonymous foreign clients lack), as
	// it calls the App's business code.
	private bool
	// line: over telnet the command takes the rest of its line as one
	// argument, its spaces kept (JSON strings hold them).
	line bool
}

// builtinCommands are Dubbo's QoS commands that weft has, in help's order.
// (A function, not a package variable: help refers to the list.)
func builtinCommands() []command {
	return []command{
		{name: "help", args: "[command]", help: "list the commands, or explain one", run: cmdHelp},
		{name: "ls", args: "", help: "list the services (with their addresses and registries) and the references (with their providers)", run: cmdLs},
		{name: "ps", args: "", help: "list the ports this App listens on", run: cmdPs},
		{name: "online", args: "[service]", help: "register the service again in every registry (all services without an argument)", run: cmdOnline},
		{name: "offline", args: "[service]", help: "unregister the service from every registry without stopping it: consumers stop choosing this App, calls in flight finish (all services without an argument)", run: cmdOffline},
		{name: "ready", args: "", help: "readiness probe: true once started with a service online, false from the first moment of a graceful stop (HTTP 200/503)", run: probe(App.Ready)},
		{name: "live", args: "", help: "liveness probe: true while the App runs (HTTP 200/503)", run: probe(App.Live)},
		{name: "startup", args: "", help: "startup probe: true once the App's start has finished (HTTP 200/503)", run: probe(App.Started)},
		{name: "invoke", args: "SERVICE.METHOD(JSON ARGS)", private: true, line: true, run: cmdInvoke,
			help: `call a method of one of this App's services, as a generic call through its filters, and print the result as JSON: invoke org.example.Greeter.sayHello("world") (the service by id, interface or service key; from the App's machine only)`},
		{name: "quit", help: "end the telnet session", run: func(context.Context, *Server, []string) result {
			return result{status: http.StatusBadRequest, text: "BYE!", quit: true}
		}},
	}
}

func (s *Server) lookup(name string) (command, bool) {
	for _, c := range s.cmds {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run runs one command line (name and args) for a telnet session or an HTTP
// request, bounded by the command timeout and the server's life.
func (s *Server) run(name string, args []string, telnet, local bool) result {
	if name == "exit" && telnet {
		name = "quit"
	}
	c, found := s.lookup(name)
	if !found {
		return result{status: http.StatusNotFound,
			text: fmt.Sprintf("unknown command %q; known: %s (help explains them)", name, strings.Join(s.names(), ", "))}
	}
	if c.name == "quit" && !telnet {
		return result{status: http.StatusBadRequest, text: "quit ends a telnet session; HTTP requests need none"}
	}
	if c.private && !local {
		return result{status: http.StatusForbidden, text: fmt.Sprintf("%s runs the App's code: run it from the App's machine (127.0.0.1), not from another host", name)}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	defer cancel()
	return c.run(ctx, s, args)
}

func (s *Server) names() []string {
	out := make([]string, len(s.cmds))
	for i, c := range s.cmds {
		out[i] = c.name
	}
	return out
}

func cmdHelp(_ context.Context, s *Server, args []string) result {
	var b strings.Builder
	if len(args) > 0 {
		c, found := s.lookup(args[0])
		if !found {
			return result{status: http.StatusNotFound, text: fmt.Sprintf("unknown command %q; known: %s", args[0], strings.Join(s.names(), ", "))}
		}
		fmt.Fprintf(&b, "%s %s\n  %s\n", c.name, c.args, c.help)
		if c.args != "" {
			fmt.Fprintf(&b, "HTTP: GET /%s?service=NAME (the query's values are the arguments, in order)\n", c.name)
		}
		return ok(b.String())
	}
	rows := [][]string{{"Command", "Arguments", "What it does"}}
	for _, c := range s.cmds {
		rows = append(rows, []string{c.name, c.args, c.help})
	}
	b.WriteString(table(rows))
	b.WriteString("telnet: type a command at the prompt; HTTP: GET /COMMAND?arg (e.g. /offline?service=org.example.Greeter); /metrics: the App's metrics\n")
	return ok(b.String())
}

// maxListed bounds how many providers ls prints per reference: a service
// with hundreds of providers would make a table no one can read.
const maxListed = 10

// chain shows a filter chain in the order a call meets it.
func chain(filters []string) string {
	if len(filters) == 0 {
		return "-"
	}
	return strings.Join(filters, " > ")
}

func cmdLs(_ context.Context, s *Server, _ []string) result {
	var b strings.Builder
	b.WriteString("As Provider side:\n")
	rows := [][]string{{"ID", "Provider Service Name", "Address", "PUB", "Filters"}}
	for _, sv := range s.cfg.App.Services() {
		var pub []string
		for _, r := range sv.Registries {
			pub = append(pub, fmt.Sprintf("%s(%s)", r.Registry, yn(r.Registered)))
		}
		if len(pub) == 0 {
			pub = []string{"-"}
		}
		rows = append(rows, []string{sv.ID, sv.Key, strings.Join(sv.Exports, ", "), strings.Join(pub, "/"), chain(sv.Filters)})
	}
	b.WriteString(table(rows))
	b.WriteString("As Consumer side:\n")
	rows = [][]string{{"ID", "Consumer Service Name", "NUM", "Providers", "Filters"}}
	for _, r := range s.cfg.App.References() {
		list := r.Providers
		if len(list) > maxListed {
			list = append(list[:maxListed:maxListed], fmt.Sprintf("... %d more", len(r.Providers)-maxListed))
		}
		from := "direct"
		if r.Discover {
			from = "registry"
		}
		rows = append(rows, []string{r.ID, r.Key, fmt.Sprintf("%d (%s)", len(r.Providers), from), strings.Join(list, ", "), chain(r.Filters)})
	}
	b.WriteString(table(rows))
	return ok(b.String())
}

// cmdInvoke is Dubbo's QoS invoke: SERVICE.METHOD(JSON ARGS), the
// arguments a JSON array without its brackets (telnet splits the line at
// spaces for other commands, not for this one).
func cmdInvoke(ctx context.Context, s *Server, args []string) result {
	line := strings.TrimSpace(strings.Join(args, " "))
	open := strings.IndexByte(line, '(')
	if open < 0 || !strings.HasSuffix(line, ")") {
		return result{status: http.StatusBadRequest, text: `usage: invoke SERVICE.METHOD(JSON ARGS), e.g. invoke org.example.Greeter.sayHello("world")`}
	}
	target, argsJSON := line[:open], "["+line[open+1:len(line)-1]+"]"
	dot := strings.LastIndexByte(target, '.')
	if dot <= 0 || dot == len(target)-1 {
		return result{status: http.StatusBadRequest, text: fmt.Sprintf("%q: want SERVICE.METHOD, the service by id, interface or service key", target)}
	}
	began := time.Now()
	out, err := s.cfg.App.Invoke(ctx, target[:dot], target[dot+1:], argsJSON)
	if errors.Is(err, ErrNotFound) {
		return result{status: http.StatusNotFound, text: err.Error()}
	}
	if err != nil {
		return result{status: http.StatusInternalServerError, text: err.Error()}
	}
	return ok(fmt.Sprintf("result: %s\nelapsed: %d ms.", out, time.Since(began).Milliseconds()))
}

// isLoopback says whether a client's address is on this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func cmdPs(_ context.Context, s *Server, _ []string) result {
	rows := [][]string{{"Protocol", "Address"}}
	for _, p := range s.cfg.App.Ports() {
		rows = append(rows, []string{p.Protocol, p.Addr})
	}
	rows = append(rows, []string{"qos", s.Addr()})
	return ok(table(rows))
}

func cmdOnline(ctx context.Context, s *Server, args []string) result {
	return onOff(ctx, args, "online", s.cfg.App.Online)
}

func cmdOffline(ctx context.Context, s *Server, args []string) result {
	return onOff(ctx, args, "offline", s.cfg.App.Offline)
}

func onOff(ctx context.Context, args []string, what string, do func(context.Context, string) ([]string, error)) result {
	if len(args) > 1 {
		return result{status: http.StatusBadRequest, text: fmt.Sprintf("%s takes at most one service (a service id, interface, service key or pattern), got %d arguments", what, len(args))}
	}
	service := ""
	if len(args) == 1 {
		service = args[0]
	}
	keys, err := do(ctx, service)
	var b strings.Builder
	if len(keys) > 0 {
		fmt.Fprintf(&b, "%s: %s\n", what, strings.Join(keys, ", "))
	}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, ErrNotFound) {
			status = http.StatusNotFound
		}
		fmt.Fprintf(&b, "error: %v\n", err)
		return result{status: status, text: b.String()}
	}
	b.WriteString("OK\n")
	return ok(b.String())
}

// probe answers a Kubernetes probe as Dubbo does: "true" with 200, "false"
// with 503 (here followed by the reason).
func probe(check func(App) (bool, string)) func(context.Context, *Server, []string) result {
	return func(_ context.Context, s *Server, _ []string) result {
		yes, why := check(s.cfg.App)
		if yes {
			return ok("true\n")
		}
		if why != "" {
			return result{status: http.StatusServiceUnavailable, text: "false: " + why + "\n"}
		}
		return result{status: http.StatusServiceUnavailable, text: "false\n"}
	}
}

func yn(b bool) string {
	if b {
		return "Y"
	}
	return "N"
}

// table draws rows (the first is the header) as Dubbo's ls does.
func table(rows [][]string) string {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	var b strings.Builder
	line := func() {
		for _, w := range width {
			b.WriteString("+" + strings.Repeat("-", w+2))
		}
		b.WriteString("+\n")
	}
	line()
	for n, r := range rows {
		for i, cell := range r {
			fmt.Fprintf(&b, "| %-*s ", width[i], cell)
		}
		b.WriteString("|\n")
		if n == 0 {
			line()
		}
	}
	line()
	return b.String()
}

// httpHandler serves the commands as GET /COMMAND?args and the App's
// metrics at /metrics.
func (s *Server) httpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.track(nil) {
			http.Error(w, "the QoS server is closing", http.StatusServiceUnavailable)
			return
		}
		defer s.untrack(nil)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		name := strings.Trim(r.URL.Path, "/")
		if name == "metrics" {
			if s.cfg.Metrics == nil {
				http.Error(w, "metrics disabled: this App has no metrics handler", http.StatusNotFound)
				return
			}
			s.cfg.Metrics.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "QoS commands answer GET (HEAD, POST) only", http.StatusMethodNotAllowed)
			return
		}
		if name == "" {
			name = "help"
		}
		args, err := queryArgs(r.URL.RawQuery)
		if err != nil {
			http.Error(w, fmt.Sprintf("bad query %q: %v; pass arguments as /%s?service=NAME", r.URL.RawQuery, err, name), http.StatusBadRequest)
			return
		}
		res := s.run(name, args, false, isLoopback(r.RemoteAddr))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(res.status)
		if !strings.HasSuffix(res.text, "\n") {
			res.text += "\n"
		}
		w.Write([]byte(res.text))
	})
}

// queryArgs turns a query into command arguments in their order, as Dubbo
// does: the values of ?service=a&method=b are a, b; a bare ?a is a.
func queryArgs(raw string) ([]string, error) {
	var args []string
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		v := part
		if _, after, found := strings.Cut(part, "="); found {
			v = after
		}
		u, err := url.QueryUnescape(v)
		if err != nil {
			return nil, err
		}
		args = append(args, u)
	}
	return args, nil
}
