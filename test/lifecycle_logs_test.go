package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// The life of an App in its log at info level: each export with the port
// it really bound (port 0) and its registries, each reference with its
// providers, provider-list changes, start and stop with how long they
// took; a provider that leaves is a warning on the consumer naming it.
func TestLogsShowTheLifeOfAnApp(t *testing.T) {
	noLeaks(t)
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	provLog, consLog := &syncBuffer{}, &syncBuffer{}
	info := func(b *syncBuffer) weft.Option {
		return weft.WithLogger(slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
	provider, err := weft.New(weft.WithoutEnv(), info(provLog), weft.WithService("vault", &vault{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: vault-app}
registries: {r: {address: %q}}
protocols: {dubbo: {port: 0}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, reg))))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second provider: the consumer keeps the last provider of a list
	// that empties (Dubbo's empty protection), so one must stay for the
	// first to be dropped.
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
protocols: {dubbo: {port: 0}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, reg), weft.WithService("vault", &vault{}))
	var c tokenClient
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
consumer: {references: {vault: {interface: org.weft.Vault}}}
`, reg), weft.WithReference("vault", &c), info(consLog))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Secret(context.Background(), "x"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no call through the registry: %v", err)
		}
	}

	exported := regexp.MustCompile(`level=INFO msg="weft: exported" service=vault interface=org.weft.Vault protocol=dubbo address=[^ ]+:([0-9]+) registries=r`)
	m := exported.FindStringSubmatch(provLog.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("the provider's log does not show the bound port:\n%s", provLog)
	}
	port := m[1]
	for _, want := range []string{`msg="weft: started" application=vault-app services=1 references=0 took=`} {
		if !strings.Contains(provLog.String(), want) {
			t.Errorf("provider log lacks %q:\n%s", want, provLog)
		}
	}
	for _, want := range []string{
		`msg="weft: referred" reference=vault interface=org.weft.Vault registries=r`,
		`msg="weft: providers changed" service=org.weft.Vault providers=`,
		`:` + port,
		`msg="weft: started"`,
	} {
		if !strings.Contains(consLog.String(), want) {
			t.Errorf("consumer log lacks %q:\n%s", want, consLog)
		}
	}

	// Started against running providers, the consumer dropped none
	// (TestNoSpuriousProviderDropAtStart).
	dropped := `level=WARN msg="weft: provider dropped: the registry no longer lists it" service=org.weft.Vault provider=`
	if strings.Contains(consLog.String(), dropped) {
		t.Fatalf("the consumer warned of a provider dropped before any left:\n%s", consLog)
	}

	if err := provider.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`msg="weft: stopping" application=vault-app`, `msg="weft: stopped" application=vault-app took=`} {
		if !strings.Contains(provLog.String(), want) {
			t.Errorf("provider log lacks %q:\n%s", want, provLog)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(consLog.String(), dropped+"127.0.0.1:"+port); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer did not warn of the provider that left, by its address (port %s):\n%s", port, consLog)
		}
	}
	// Once: its instance leaves first (newest registration first), and the
	// consumer falls back to the interface level, which still lists it a
	// moment longer; that is the same provider, not one dropped and added.
	time.Sleep(500 * time.Millisecond)
	if n := strings.Count(consLog.String(), dropped); n != 1 {
		t.Errorf("%d provider drops, want 1:\n%s", n, consLog)
	}
}

// The App's logger from config (dubbo-go's logger keys): level, JSON
// format, a file appender; a bad value fails weft.New naming the key.
func TestLoggerFromConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weft.log")
	// QoS on a free port: on its default (22222), taken by any other weft
	// on the machine, it logs a warning of its own.
	app, err := weft.New(weft.WithoutEnv(), weft.WithService("vault", &vault{}), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
logger: {level: warn, format: json, appender: file, file: {name: %q}}
protocols: {dubbo: {port: 0}}
qos: {port: 0}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, path))))
	if err != nil {
		t.Fatal(err)
	}
	app.Logger().Info("not at warn")
	app.Logger().Warn("at warn", "k", "v")
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	if len(lines) != 1 || lines[0]["msg"] != "at warn" || lines[0]["level"] != "WARN" || lines[0]["k"] != "v" {
		t.Fatalf("want only the warning, as JSON: %v", lines)
	}

	for yaml, want := range map[string]string{
		"logger: {level: verbose}":   `logger.level: "verbose" is not a level (known: debug, info, warn, error)`,
		"logger: {format: xml}":      `logger.format: "xml" is not a format (known: text, json)`,
		"logger: {appender: syslog}": `logger.appender: "syslog" is not an appender (known: console, file)`,
		"logger: {appender: file}":   `logger.file.name: the file appender needs a file`,
	} {
		_, err := weft.New(weft.WithoutEnv(), weft.WithService("vault", &vault{}), weft.WithConfig(weft.ConfigYAML(yaml+`
provider: {services: {vault: {interface: org.weft.Vault}}}
`)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", yaml, want, err)
		}
	}
}

// A consumer started against running providers warns of no provider
// dropped: the registry lists them all along, through both of its levels
// under Dubbo 3's default APPLICATION_FIRST (the interface-level URL, then,
// a metadata fetch later, the application-level instance), which used to
// read as every provider dropped and referred again at every start. A
// provider that really stops is still dropped, with the warning naming it,
// and the other is not touched.
func TestNoSpuriousProviderDropAtStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reg     func(t *testing.T) string
		options []weft.Option
	}{
		{"embedded", func(t *testing.T) string { return "embedded://" + t.TempDir() + "?heartbeat=200" }, nil},
		{"zookeeper", zkRegistry, []weft.Option{weft.WithPlugins(zookeeper.Plugin())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := tc.reg(t)
			noLeaks(t)
			provider := func(app string) (*weft.App, string) {
				log := &syncBuffer{}
				opts := append([]weft.Option{weft.WithService("vault", &vault{}),
					weft.WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})))}, tc.options...)
				a := startApp(t, fmt.Sprintf(`
application: {name: %s}
registries: {r: {address: %q}}
protocols: {dubbo: {port: 0}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, app, reg), opts...)
				m := regexp.MustCompile(`msg="weft: exported" service=vault interface=org.weft.Vault protocol=dubbo address=([^ ]+:[0-9]+) `).FindStringSubmatch(log.String())
				if m == nil {
					t.Fatalf("%s's log does not show its address:\n%s", app, log)
				}
				return a, m[1]
			}
			p1, addr1 := provider("vault-app")
			_, addr2 := provider("vault-app-2")
			consLog := &syncBuffer{}
			var c tokenClient
			startApp(t, fmt.Sprintf(`
application: {name: vault-consumer}
registries: {r: {address: %q}}
consumer: {references: {vault: {interface: org.weft.Vault}}}
`, reg), append([]weft.Option{weft.WithReference("vault", &c),
				weft.WithLogger(slog.New(slog.NewTextHandler(consLog, &slog.HandlerOptions{Level: slog.LevelInfo})))}, tc.options...)...)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := c.Secret(context.Background(), "x"); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("no call through the registry: %v", err)
				}
			}
			// Both levels answer within milliseconds of the start (the
			// drop came 1-15 ms after it): a second is well past them.
			dropped := `level=WARN msg="weft: provider dropped: the registry no longer lists it" service=org.weft.Vault provider=`
			time.Sleep(time.Second)
			if strings.Contains(consLog.String(), dropped) {
				t.Fatalf("a consumer started against running providers dropped one:\n%s", consLog)
			}
			for _, want := range []string{addr1, addr2} {
				if !strings.Contains(consLog.String(), want) {
					t.Errorf("the consumer's log does not show provider %s:\n%s", want, consLog)
				}
			}

			if err := p1.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(consLog.String(), dropped+addr1); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the consumer did not warn of the provider that stopped (%s):\n%s", addr1, consLog)
				}
			}
			time.Sleep(500 * time.Millisecond) // the other level's removal
			if n := strings.Count(consLog.String(), dropped); n != 1 || strings.Contains(consLog.String(), dropped+addr2) {
				t.Fatalf("%d drops after one provider stopped, want 1 (%s):\n%s", n, addr1, consLog)
			}
			if _, err := c.Secret(context.Background(), "x"); err != nil {
				t.Fatalf("the provider left (%s) does not answer: %v", addr2, err)
			}
		})
	}
}
