package weft_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
)

// qos.port is checked like every other port, with its key path and fix;
// unknown keys under qos fail too.
func TestQoSConfigChecks(t *testing.T) {
	for doc, want := range map[string]string{
		"qos: {port: 70000}": "qos.port: 70000 is not allowed: want 0..65535 (unset: Dubbo's 22222; 0 picks a free port); set a TCP port such as 22222, 0 for any free one, or qos.enable: false",
		"qos: {port: -1}":    "qos.port: -1 is not allowed",
		"qos: {prot: 1}":     "unknown key qos.prot (known at qos: accept_foreign_ip, enable, port)",
	} {
		_, err := newFromYAML(validBase, doc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

// qos.enable false (or WEFT_QOS_ENABLE=false) starts no server; port 0
// binds a free port on 127.0.0.1 (accept_foreign_ip false) that QoSAddr
// names while the App runs, and none once it has stopped.
func TestQoSEnableAndAddr(t *testing.T) {
	off, err := newFromYAML(validBase, "qos: {enable: false}")
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off.QoSAddr() != "" {
		t.Errorf("qos.enable false: listening on %s", off.QoSAddr())
	}
	off.Stop(context.Background())

	t.Setenv("WEFT_QOS_ENABLE", "false")
	env, err := weft.New(weft.WithConfig(weft.ConfigYAML(validBase)), weft.WithLogger(quiet), weft.WithService("greeter", greeter{}))
	if err != nil {
		t.Fatal(err)
	}
	if env.Config().QoS.Enable == nil || *env.Config().QoS.Enable {
		t.Errorf("WEFT_QOS_ENABLE=false: qos.enable is %v", env.Config().QoS.Enable)
	}

	app, err := newFromYAML(validBase, "qos: {port: 0}")
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := app.QoSAddr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("QoSAddr %q: want 127.0.0.1 and the port it got", addr)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A consumer of its own service over injvm: started, nothing offline.
	if resp.StatusCode != 200 || string(body) != "true\n" {
		t.Errorf("/ready: %d %q", resp.StatusCode, body)
	}
	// No registry: offline has nothing to do, and says so.
	resp, err = c.Get("http://" + addr + "/offline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "no such service in any registry, nothing to unregister: org.example.Greeter:1.0") {
		t.Errorf("/offline without registries: %d %q", resp.StatusCode, body)
	}
	app.Stop(context.Background())
	if app.QoSAddr() != "" {
		t.Errorf("QoSAddr after Stop: %q", app.QoSAddr())
	}
}

// offline and online name services by id, interface, service key or a
// pattern, as Dubbo's do; offline of some services keeps the App ready,
// offline of all makes it unready (Dubbo 3's readiness), online restores it.
func TestQoSOfflineMatchesAndReadiness(t *testing.T) {
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("greeter", greeter{}),
		weft.WithConfig(weft.ConfigYAML(`
qos: {port: 0}
registries: {local: {address: "embedded://`+t.TempDir()+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
    other: {interface: org.example.Other, ref: greeter}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	get := qosGetter(t, app)
	steps := []struct {
		path  string
		code  int
		body  string
		ready int
	}{
		{"/offline?service=org.example.Greeter:1.0", 200, "offline: org.example.Greeter:1.0\nOK", 200},
		{"/ls", 200, "local(N)", 200},
		{"/offline?service=nosuch", 404, `no service matches "nosuch"; services: greeter (org.example.Greeter:1.0), other (org.example.Other)`, 200},
		{"/offline?service=org%5C.example%5C..*", 200, "org.example.Greeter:1.0, org.example.Other", 503},
		{"/online?service=other", 200, "online: org.example.Other", 200},
		{"/online", 200, "online: org.example.Greeter:1.0, org.example.Other", 200},
		{"/online?a&b", 400, "at most one service", 200},
	}
	for _, s := range steps {
		if code, body := get(s.path); code != s.code || !strings.Contains(body, s.body) {
			t.Errorf("%s: %d %q, want %d with %q", s.path, code, body, s.code, s.body)
		}
		if code, body := get("/ready"); code != s.ready {
			t.Errorf("/ready after %s: %d %q, want %d", s.path, code, body, s.ready)
		}
	}
	if _, body := get("/ls"); strings.Contains(body, "local(N)") {
		t.Errorf("ls after online: %s", body)
	}
}

// QoS invoke calls a service of the App through its filters (generic call,
// JSON arguments, the result as JSON); ls shows each service's and
// reference's filter chain in the order a call meets it.
func TestQoSInvokeAndFilterChains(t *testing.T) {
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("greeter", greeter{}),
		weft.WithConfig(weft.ConfigYAML(`
qos: {port: 0}
protocols: {injvm: {name: injvm}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0", executes: 5, filter: "-echo"}
consumer:
  references:
    g: {interface: org.example.Greeter, version: "1.0", protocol: injvm, actives: 3}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	get := qosGetter(t, app)
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{`/invoke?org.example.Greeter.sayHello(%22Bo%22)`, 200, `result: "hello Bo"`},
		{`/invoke?greeter.sayHello(%22%22)`, 500, "empty name"},
		{`/invoke?greeter.sayHello(oops)`, 500, "arguments: invalid character"},
		{`/invoke?nobody.sayHello()`, 404, `no service matches "nobody"`},
		{`/ls`, 200, "metrics > profiler-server > context > exception > executelimit > timeout"},
		{`/ls`, 200, "metrics > consumercontext > activelimit"},
	} {
		if code, body := get(c.path); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d with %q", c.path, code, body, c.code, c.body)
		}
	}
	if _, body := get("/ls"); strings.Contains(body, "echo >") {
		t.Errorf("ls shows echo, which the service's filter list removes:\n%s", body)
	}
}

// qosGetter GETs a path of app's QoS port: the status and the body.
func qosGetter(t *testing.T, app *weft.App) func(path string) (int, string) {
	return func(path string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + app.QoSAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}
