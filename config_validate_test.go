package weft_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// A config that declares a service and a reference; each case below lays
// one bad value over it.
const validBase = `
application: {name: test}
protocols: {injvm: {name: injvm}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
consumer:
  references:
    greeter: {interface: org.example.Greeter, version: "1.0", protocol: injvm}
`

func newFromYAML(docs ...string) (*weft.App, error) {
	var sources []weft.ConfigSource
	for _, d := range docs {
		sources = append(sources, weft.ConfigYAML(d))
	}
	return weft.New(weft.WithConfig(sources...), weft.WithoutEnv(), weft.WithLogger(quiet),
		weft.WithService("greeter", greeter{}))
}

// Every numeric setting that has a meaningless range fails New with its key
// path, the bad value and what is allowed.
func TestConfigRejectsMeaninglessValues(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		// timeout: > 0 ms, 0 = inherited / the default.
		{"consumer timeout", `consumer: {timeout: -5}`,
			[]string{"consumer.timeout: -5 is not allowed", "ms > 0", "1000 ms"}},
		{"reference timeout", `consumer: {references: {greeter: {timeout: -1}}}`,
			[]string{"consumer.references.greeter.timeout: -1 is not allowed"}},
		{"reference method timeout", `consumer: {references: {greeter: {methods: {sayHello: {timeout: -5}}}}}`,
			[]string{"consumer.references.greeter.methods.sayHello.timeout: -5 is not allowed", "ms > 0"}},
		// A TLS block without a certificate, in an App with services.
		{"tls server without certificate", "tls: {tls-server-name: orders.internal}\nprovider: {services: {greeter: {interface: org.example.Greeter}}}",
			[]string{"tls: this App provides services", "set tls-cert-file and tls-key-file"}},
		{"provider timeout", `provider: {timeout: -2}`,
			[]string{"provider.timeout: -2 is not allowed"}},
		{"service timeout", `provider: {services: {greeter: {timeout: -3}}}`,
			[]string{"provider.services.greeter.timeout: -3 is not allowed"}},
		{"service method timeout", `provider: {services: {greeter: {methods: {sayHello: {timeout: -4}}}}}`,
			[]string{"provider.services.greeter.methods.sayHello.timeout: -4 is not allowed"}},
		// retries >= 0.
		{"consumer retries", `consumer: {retries: -1}`,
			[]string{"consumer.retries: -1 is not allowed", ">= 0", "0: no retry"}},
		{"reference retries", `consumer: {references: {greeter: {retries: -1}}}`,
			[]string{"consumer.references.greeter.retries: -1 is not allowed"}},
		{"method retries", `consumer: {references: {greeter: {methods: {sayHello: {retries: -7}}}}}`,
			[]string{"consumer.references.greeter.methods.sayHello.retries: -7 is not allowed"}},
		// executes / actives >= 0, 0 = no limit.
		{"provider executes", `provider: {executes: -1}`,
			[]string{"provider.executes: -1 is not allowed", ">= 0", "no limit"}},
		{"service executes", `provider: {services: {greeter: {executes: -1}}}`,
			[]string{"provider.services.greeter.executes: -1 is not allowed"}},
		{"service method executes", `provider: {services: {greeter: {methods: {sayHello: {executes: -2}}}}}`,
			[]string{"provider.services.greeter.methods.sayHello.executes: -2 is not allowed"}},
		{"consumer actives", `consumer: {actives: -3}`,
			[]string{"consumer.actives: -3 is not allowed", ">= 0", "no limit"}},
		{"reference actives", `consumer: {references: {greeter: {actives: -3}}}`,
			[]string{"consumer.references.greeter.actives: -3 is not allowed"}},
		{"reference method actives", `consumer: {references: {greeter: {methods: {sayHello: {actives: -1}}}}}`,
			[]string{"consumer.references.greeter.methods.sayHello.actives: -1 is not allowed"}},
		// weight, forks, connections, shutdown wait >= 0.
		{"weight", `provider: {services: {greeter: {weight: -10}}}`,
			[]string{"provider.services.greeter.weight: -10 is not allowed", ">= 0", "100"}},
		{"forks", `consumer: {references: {greeter: {methods: {sayHello: {forks: -1}}}}}`,
			[]string{"consumer.references.greeter.methods.sayHello.forks: -1 is not allowed", ">= 0"}},
		{"connections", `consumer: {references: {greeter: {connections: -2}}}`,
			[]string{"consumer.references.greeter.connections: -2 is not allowed", ">= 0", "shared"}},
		{"shutdown wait", `provider: {shutdown: {wait: -100}}`,
			[]string{"provider.shutdown.wait: -100 is not allowed", ">= 0"}},
		// protocols: port 0..65535, threads > 0, payload 1..2 GiB-1.
		{"port too big", `protocols: {dubbo: {port: 70000}}`,
			[]string{"protocols.dubbo.port: 70000 is not allowed", "0..65535", "0 picks a free port"}},
		{"port negative", `protocols: {dubbo: {port: -1}}`,
			[]string{"protocols.dubbo.port: -1 is not allowed"}},
		{"threads negative", `protocols: {dubbo: {threads: -4}}`,
			[]string{"protocols.dubbo.threads: -4 is not allowed", "> 0", "200"}},
		{"threads zero", `protocols: {dubbo: {threads: 0}}`,
			[]string{"protocols.dubbo.threads: 0 is not allowed", "> 0"}},
		{"payload negative", `protocols: {dubbo: {payload: -1}}`,
			[]string{"protocols.dubbo.payload: -1 is not allowed", "1..2147483647"}},
		{"payload zero", `protocols: {dubbo: {payload: 0}}`,
			[]string{"protocols.dubbo.payload: 0 is not allowed"}},
		{"payload over 32 bits", `protocols: {dubbo: {payload: 4294967296}}`,
			[]string{"protocols.dubbo.payload: 4294967296 is not allowed", "32-bit"}},
		// wasm: max_memory_pages 0..65536, timeout and max_instances >= 0 (checked before the
		// module is looked at).
		{"wasm pages", `wasm: {filters: {wasm-x: {path: x.wasm, max_memory_pages: 70000}}}`,
			[]string{"wasm.filters.wasm-x.max_memory_pages: 70000 is not allowed", "0..65536"}},
		{"wasm pages negative", `wasm: {filters: {wasm-x: {path: x.wasm, max_memory_pages: -1}}}`,
			[]string{"wasm.filters.wasm-x.max_memory_pages: -1 is not allowed"}},
		{"wasm timeout", `wasm: {filters: {wasm-x: {path: x.wasm, timeout: -1}}}`,
			[]string{"wasm.filters.wasm-x.timeout: -1 is not allowed", ">= 0"}},
		{"wasm instances negative", `wasm: {filters: {wasm-x: {path: x.wasm, max_instances: -2}}}`,
			[]string{"wasm.filters.wasm-x.max_instances: -2 is not allowed: want >= 0 instances (0 or unset: no cap",
				"set the most instances of the module at once, e.g. max_instances: 8, or 0 for no cap"}},
		// Every bad value is reported at once, in key order.
		{"several", `
consumer: {timeout: -5, references: {greeter: {retries: -1}}}
protocols: {dubbo: {port: 65536}}`,
			[]string{"consumer.references.greeter.retries: -1 is not allowed", "consumer.timeout: -5 is not allowed",
				"protocols.dubbo.port: 65536 is not allowed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newFromYAML(validBase, tc.yaml)
			if err == nil {
				t.Fatal("New succeeded, want a start-up error")
			}
			for _, w := range append([]string{"weft: config: "}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// The exact text of one error: key path, value, what is allowed, the fix.
func TestConfigValueErrorText(t *testing.T) {
	_, err := newFromYAML(validBase, `consumer: {references: {greeter: {methods: {sayHello: {timeout: -5}}}}}`)
	want := "weft: config: consumer.references.greeter.methods.sayHello.timeout: -5 is not allowed: " +
		"want ms > 0 (0 or unset: inherited, 1000 ms by default); set a positive number of ms or remove the key"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n %v\nwant:\n %s", err, want)
	}
	_, err = newFromYAML(validBase, `protocols: {dubbo: {port: 70000}}`)
	want = "weft: config: protocols.dubbo.port: 70000 is not allowed: want 0..65535 (0 picks a free port); " +
		"set a TCP port such as 20880, or 0"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n %v\nwant:\n %s", err, want)
	}
}

// Mistakes a new user makes, each reported once, at its key path, with the
// value and what the key wants (issue 25: a misspelt block was reported
// once per key below it, and a wrong type in the decoder's words).
func TestConfigTypeAndSpellingErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"provder: {services: {a: {interface: x.A}, b: {interface: x.B, timeout: 5}}}",
			"weft: config: unknown key provder (known at the top level: application, config_center, consumer, logger, metrics, protocols, provider, qos, registries, tls, tracing, wasm)"},
		{`consumer: {timeout: "3s"}`, `weft: config: consumer.timeout: "3s" is not a number of ms`},
		{`provider: {shutdown: {wait: 2.5}}`, `weft: config: provider.shutdown.wait: 2.5 is not a whole number of ms`},
		{`protocols: {dubbo: {payload: 8MiB}}`, `weft: config: protocols.dubbo.payload: "8MiB" is not a number of bytes`},
		{`qos: {enable: maybe}`, `weft: config: qos.enable: "maybe" is not true or false`},
		{`protocols: dubbo`, `weft: config: protocols: "dubbo" is not a block of keys`},
		{`provider: {services: {greeter: {interface: [a, b]}}}`, `weft: config: provider.services.greeter.interface: a list is not a string`},
	} {
		_, err := newFromYAML(validBase, c.doc)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got  %v\n want %s", c.doc, err, c.want)
		}
	}
	// An unknown registry is the one error: not also "nothing to export"
	// or "no registry" for a reference that was to use it.
	for _, doc := range []string{
		`registries: {r: {address: "foo://127.0.0.1:1"}}`,
		`{registries: {r: {address: "foo://127.0.0.1:1"}}, consumer: {references: {a: {interface: x.Y}}}}`,
	} {
		_, err := weft.New(weft.WithConfig(weft.ConfigYAML(doc)), weft.WithoutEnv(), weft.WithLogger(quiet))
		want := `weft: config: registries.r.address: unknown registry extension "foo" (known: embedded)`
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got  %v\n want %s", doc, err, want)
		}
	}
	// The environment's values are strings: those that read as what the
	// key wants pass.
	t.Setenv("WEFT_CONSUMER_TIMEOUT", "500")
	t.Setenv("WEFT_QOS_ENABLE", "false")
	if _, err := weft.New(weft.WithConfig(weft.ConfigYAML(validBase)), weft.WithLogger(quiet),
		weft.WithService("greeter", greeter{})); err != nil {
		t.Fatalf("numbers and booleans from the environment: %v", err)
	}
}

// A bad value from a WEFT_* variable is reported at its key path too.
func TestConfigRejectsBadValueFromEnv(t *testing.T) {
	t.Setenv("WEFT_CONSUMER_ACTIVES", "-3")
	_, err := weft.New(weft.WithConfig(weft.ConfigYAML(validBase)), weft.WithLogger(quiet),
		weft.WithService("greeter", greeter{}))
	if err == nil || !strings.Contains(err.Error(), "consumer.actives: -3 is not allowed") {
		t.Fatalf("err = %v", err)
	}
}

// The edges of each range, and the zeros that mean "default" or "no
// limit", still start.
func TestConfigAcceptsBoundaryValues(t *testing.T) {
	for _, doc := range []string{
		`consumer: {timeout: 0, retries: 0, actives: 0, references: {greeter: {connections: 0, retries: 0, methods: {sayHello: {retries: 0, forks: 0, actives: 0}}}}}`,
		`provider: {timeout: 0, executes: 0, shutdown: {wait: 0}, services: {greeter: {weight: 0, executes: 0}}}`,
		`protocols: {dubbo: {port: 0, threads: 1, payload: 2147483647}}`,
		`protocols: {dubbo: {port: 65535}}`,
		`consumer: {timeout: 1, retries: 10, actives: 4, references: {greeter: {connections: 2}}}`,
	} {
		if _, err := newFromYAML(validBase, doc); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// An App with nothing to export and nothing to refer would start idle and
// silent: New says what is missing instead.
func TestEmptyConfigSaysWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []weft.Option
		want []string
	}{
		{"nothing at all", []weft.Option{weft.WithConfig(weft.ConfigYAML(""))}, nil},
		{"only defaults", []weft.Option{weft.WithConfig(weft.ConfigYAML("consumer: {timeout: 100}\nprotocols: {dubbo: {port: 0}}"))}, nil},
		{"an implementation without a service", []weft.Option{weft.WithConfig(weft.ConfigYAML("")), weft.WithService("greeter", greeter{})},
			[]string{`registered but not exported: greeter`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weft.New(append(tc.opts, weft.WithoutEnv(), weft.WithLogger(quiet))...)
			if err == nil {
				t.Fatal("New succeeded with no services and no references")
			}
			for _, w := range append([]string{"weft: config: no services or references configured",
				"provider.services", "consumer.references", "quick start in README.md"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// memCenter is a config center in memory: PublishConfig delivers the
// document to the listeners at once.
type memCenter struct {
	mu   sync.Mutex
	docs map[string]string
	ls   map[string]extension.ConfigListener
	down bool // GetConfig fails
}

func (m *memCenter) GetDynamicConfiguration(*kernel.URL) (extension.DynamicConfiguration, error) {
	return m, nil
}

func (m *memCenter) GetConfig(_ context.Context, key, group string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return "", fmt.Errorf("connection refused")
	}
	return m.docs[key+"/"+group], nil
}

func (m *memCenter) AddListener(key, group string, l extension.ConfigListener) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ls[key+"/"+group] = l
	return nil
}

func (m *memCenter) RemoveListener(key, group string, _ extension.ConfigListener) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ls, key+"/"+group)
	return nil
}

func (m *memCenter) PublishConfig(_ context.Context, key, group, content string) error {
	m.mu.Lock()
	m.docs[key+"/"+group] = content
	l := m.ls[key+"/"+group]
	m.mu.Unlock()
	if l != nil {
		l.Process(extension.ConfigChangedEvent{Key: key, Group: group, Content: content})
	}
	return nil
}

func (m *memCenter) Close() error { return nil }

func memCenterPlugin(cc *memCenter) weft.Option {
	return weft.WithPlugins(weft.NewPlugin("mem", weft.Provide("mem", func(weft.Host) (extension.DynamicConfigurationFactory, error) { return cc, nil }, nil)))
}

// With check: false and a config center that cannot be read, the files
// may declare nothing yet: New warns instead of failing.
func TestEmptyConfigWithUnreadConfigCenterWarns(t *testing.T) {
	cc := &memCenter{docs: map[string]string{}, ls: map[string]extension.ConfigListener{}, down: true}
	logs := &lockedBuffer{}
	_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), memCenterPlugin(cc),
		weft.WithConfig(weft.ConfigYAML("config_center: {address: \"mem://here\", data_id: app.yaml, check: false}\nconsumer: {timeout: 777}\n")))
	if err != nil {
		t.Fatalf("check: false with an unreadable config center and no services: %v", err)
	}
	if !strings.Contains(logs.String(), "no services or references configured yet") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	// Read, and still nothing declared: the error.
	cc.down = false
	cc.docs["app.yaml/"+extension.DefaultConfigGroup] = "consumer: {retries: 1}\n"
	_, err = weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), memCenterPlugin(cc),
		weft.WithConfig(weft.ConfigYAML("config_center: {address: \"mem://here\", data_id: app.yaml}\n")))
	if err == nil || !strings.Contains(err.Error(), "no services or references configured") {
		t.Fatalf("err = %v", err)
	}
}

// A document published to the config center goes through the same value
// checks: a bad one is rejected whole and the running config stays.
func TestConfigCenterDocumentWithBadValueIsRejected(t *testing.T) {
	cc := &memCenter{docs: map[string]string{}, ls: map[string]extension.ConfigListener{}}
	logs := &lockedBuffer{}
	var c greeterClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c), memCenterPlugin(cc),
		weft.WithConfig(weft.ConfigYAML(validBase+"config_center: {address: \"mem://here\", data_id: app.yaml}\n")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	publish := func(doc string) {
		t.Helper()
		if err := cc.PublishConfig(ctx, "app.yaml", extension.DefaultConfigGroup, doc); err != nil {
			t.Fatal(err)
		}
	}
	publish("consumer: {references: {greeter: {timeout: 700, methods: {sayHello: {timeout: -5}}}}}\n")
	if got := app.Config().Consumer.References["greeter"].Timeout; got != 0 {
		t.Fatalf("reference timeout %d after a document with a bad value; want it unchanged (0)", got)
	}
	if !strings.Contains(logs.String(), "config center document rejected") ||
		!strings.Contains(logs.String(), "consumer.references.greeter.methods.sayHello.timeout: -5 is not allowed") {
		t.Fatalf("no rejection naming the key logged:\n%s", logs.String())
	}
	// A good document still applies.
	publish("consumer: {references: {greeter: {timeout: 700}}}\n")
	if got := app.Config().Consumer.References["greeter"].Timeout; got != 700 {
		t.Fatalf("reference timeout %d after a good document; want 700", got)
	}
	if got, err := c.SayHello(ctx, "x"); err != nil || got != "hello x" {
		t.Fatalf("SayHello = %q, %v", got, err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A file's values may name environment variables, ${NAME} or
// ${NAME:default}, lists' items too; an unset one without a default is an
// error at its key path, naming the file.
func TestConfigPlaceholders(t *testing.T) {
	t.Setenv("WEFTTEST_GROUP", "blue")
	t.Setenv("WEFTTEST_TIMEOUT", "750")
	cfg, err := weft.LoadConfig(weft.ConfigYAML(`
consumer:
  timeout: ${WEFTTEST_TIMEOUT}
  references:
    a: {interface: x.A, group: "${WEFTTEST_GROUP}", version: "${WEFTTEST_UNSET:1.0.0}", url: "dubbo://${WEFTTEST_HOST:127.0.0.1}:20880"}
    b: {interface: "x.$${literal}", routers: [{rule: "=> host = ${WEFTTEST_HOST:10.0.0.9}"}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Consumer.References["a"], cfg.Consumer.References["b"]
	if cfg.Consumer.Timeout != 750 || a.Group != "blue" || a.Version != "1.0.0" || a.URL != "dubbo://127.0.0.1:20880" ||
		b.Interface != "x.${literal}" || len(b.Routers) != 1 || b.Routers[0].Rule != "=> host = 10.0.0.9" {
		t.Fatalf("expanded: timeout %d, a %+v, b %+v", cfg.Consumer.Timeout, a, b)
	}
	path := t.TempDir() + "/weft.yaml"
	if err := os.WriteFile(path, []byte("consumer: {references: {a: {interface: x.A, url: \"dubbo://${WEFTTEST_HOST}:1\"}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = weft.LoadConfig(weft.ConfigFiles(path)...)
	want := "weft: config file " + path + ": consumer.references.a.url: ${WEFTTEST_HOST}: the environment variable WEFTTEST_HOST is not set; set it, or give a default: ${WEFTTEST_HOST:default}"
	if err == nil || err.Error() != want {
		t.Fatalf("err:\n %v\nwant:\n %s", err, want)
	}
}

// A dubbo-go config file runs as it is: its keys read in weft's, with the
// placeholders of weft's files, and merged with weft's own files.
func TestDubboGoConfigFile(t *testing.T) {
	t.Setenv("WEFTTEST_ZK", "10.0.0.7:2181")
	dir := t.TempDir()
	dg := dir + "/dubbogo.yml"
	if err := os.WriteFile(dg, []byte(`dubbo:
  registries:
    demoZK: {protocol: zookeeper, timeout: 3s, address: "${WEFTTEST_ZK}"}
  consumer:
    references:
      GreetServiceImpl: {protocol: tri, interface: com.apache.dubbo.sample.Greeter, registry: demoZK, retries: 3, timeout: 3000}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	over := dir + "/weft.yaml"
	if err := os.WriteFile(over, []byte("qos: {enable: false}\nconsumer: {references: {GreetServiceImpl: {check: false}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := weft.LoadConfig(weft.ConfigFiles(dg, over)...)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Consumer.References["GreetServiceImpl"]
	if got := cfg.Registries["demoZK"].Address; got != "zookeeper://10.0.0.7:2181?timeout=3000" {
		t.Errorf("registry address %q", got)
	}
	if r.Interface != "com.apache.dubbo.sample.Greeter" || r.Protocol != "tri" || r.Timeout != 3000 || r.Retries == nil || *r.Retries != 3 ||
		r.Check == nil || *r.Check || cfg.QoS.Enabled() {
		t.Errorf("reference %+v, qos %v", r, cfg.QoS.Enabled())
	}
}
