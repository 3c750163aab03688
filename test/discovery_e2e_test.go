package test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	nacos "github.com/weftrpc/weft/registry-nacos"
)

// Application-level service discovery (Dubbo 3) over the embedded
// registry: what each register mode publishes and what each migration
// step finds. A provider App "vault-app" registers in the mode under test;
// consumers with each step call it, or are told there is no provider.
func TestDiscoveryModesAndMigrationSteps(t *testing.T) {
	noLeaks(t)
	discoveryModes(t, func(t *testing.T) string { return "embedded://" + t.TempDir() + "?heartbeat=200" }, 5*time.Second)
}

// The same through Nacos (PolarisMesh here): each case in a namespace of
// its own, so that the mapping and the instances of one case or run are
// not another's. The server pushes about a second after a change, later
// under load: found gets longer.
func TestNacosDiscoveryModesAndMigrationSteps(t *testing.T) {
	addr := nacosAddr(t)
	discoveryModes(t, func(*testing.T) string { return nacosNamespace(addr) }, 20*time.Second, weft.WithPlugins(nacos.Plugin()))
}

func nacosNamespace(addr string) string {
	return fmt.Sprintf("nacos://%s?namespace=weft-sd-e2e-%d", addr, time.Now().UnixNano())
}

func discoveryModes(t *testing.T, newRegistry func(*testing.T) string, found time.Duration, opts ...weft.Option) {
	cases := []struct {
		mode string
		// which steps find the provider
		found map[string]bool
	}{
		{"interface", map[string]bool{"FORCE_INTERFACE": true, "APPLICATION_FIRST": true, "FORCE_APPLICATION": false}},
		{"instance", map[string]bool{"FORCE_INTERFACE": false, "APPLICATION_FIRST": true, "FORCE_APPLICATION": true}},
		{"all", map[string]bool{"FORCE_INTERFACE": true, "APPLICATION_FIRST": true, "FORCE_APPLICATION": true}},
	}
	for _, tc := range cases {
		t.Run("register_mode="+tc.mode, func(t *testing.T) {
			reg := newRegistry(t)
			startApp(t, fmt.Sprintf(`
application: {name: vault-app, register_mode: %s}
registries: {r: {address: %q}}
protocols: {dubbo: {port: 0}}
provider: {services: {vault: {interface: org.weft.Vault}}}
`, tc.mode, reg), append(opts, weft.WithService("vault", &vault{}))...)
			for _, step := range []string{"FORCE_INTERFACE", "APPLICATION_FIRST", "FORCE_APPLICATION"} {
				var c tokenClient
				startApp(t, fmt.Sprintf(`
application: {name: client-app, migration_step: %s}
registries: {r: {address: %q}}
consumer: {references: {vault: {interface: org.weft.Vault, check: false}}}
`, step, reg), append(opts, weft.WithReference("vault", &c))...)
				err := callWithin(&c, found, tc.found[step])
				if tc.found[step] && err != nil {
					t.Errorf("%s: no call to a provider registered with register_mode %s: %v", step, tc.mode, err)
				}
				if !tc.found[step] && kernel.CodeOf(err) != kernel.CodeNoProvider {
					t.Errorf("%s found a provider registered with register_mode %s only (err %v); want no provider", step, tc.mode, err)
				}
			}
		})
	}
}

// callWithin calls c until a call succeeds (want) or for d; it returns the
// last error. Not wanting success, it still calls for a while: a provider
// the consumer should not find must not turn up late either.
func callWithin(c *tokenClient, d time.Duration, want bool) error {
	if !want {
		d = time.Second
	}
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err = c.Secret(context.Background(), "x"); err == nil {
			return nil
		}
	}
	return err
}

// A consumer at application level follows its provider's revision: a
// service taken offline (QoS) leaves the application's metadata, the
// instance registers the new revision, and consumers stop calling it; back
// online, they call it again. provided_by names the application instead of
// the mapping; a wrong name finds nothing.
func TestDiscoveryFollowsRevisionsAndProvidedBy(t *testing.T) {
	noLeaks(t)
	discoveryRevisions(t, "embedded://"+t.TempDir()+"?heartbeat=200", 5*time.Second, 10*time.Second)
}

// The same through Nacos: the new revision reaches the consumer by the
// server's push of the re-registered instance.
func TestNacosDiscoveryFollowsRevisionsAndProvidedBy(t *testing.T) {
	addr := nacosAddr(t)
	// PolarisMesh's pushes, beside the whole suite on a loaded machine,
	// have taken over 30 s (CI, both cores under stress-ng); 5 s quiet.
	// A call that succeeds ends each wait.
	discoveryRevisions(t, nacosNamespace(addr), 30*time.Second, 60*time.Second, weft.WithPlugins(nacos.Plugin()))
}

func discoveryRevisions(t *testing.T, reg string, found, refound time.Duration, opts ...weft.Option) {
	// The Apps' warnings (a metadata fetch that failed, a registry that
	// refused) go to the test's log: printed when it fails, they say
	// which step lost the provider.
	opts = append(opts, weft.WithLogger(testLogger(t)))
	prov := startApp(t, fmt.Sprintf(`
application: {name: vault-app, register_mode: instance}
registries: {r: {address: %q}}
protocols: {dubbo: {port: 0}}
qos: {port: 0}
provider: {services: {vault: {interface: org.weft.Vault}, other: {interface: org.weft.Other}}}
`, reg), append(opts, weft.WithService("vault", &vault{}), weft.WithService("other", &vault{}))...)
	var byName, wrong tokenClient
	startApp(t, fmt.Sprintf(`
application: {name: client-app, migration_step: FORCE_APPLICATION}
registries: {r: {address: %q}}
consumer:
  references:
    vault: {interface: org.weft.Vault, provided_by: vault-app}
    wrong: {interface: org.weft.Vault, provided_by: nobody-app, check: false}
`, reg), append(opts, weft.WithReference("vault", &byName), weft.WithReference("wrong", &wrong))...)
	if err := callWithin(&byName, found, true); err != nil {
		t.Fatalf("provided_by vault-app: %v", err)
	}
	if err := callWithin(&wrong, time.Second, false); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("provided_by nobody-app found a provider: %v", err)
	}
	if code, body := qosGet(t, prov.QoSAddr(), "/offline?service=org.weft.Vault"); code != 200 {
		t.Fatalf("offline: %d %s", code, body)
	}
	// Empty protection keeps the last list of a directory that empties;
	// what must change is that the provider's metadata no longer lists it:
	// checked through a fresh consumer, which finds the instance but no
	// service in it.
	var fresh tokenClient
	startApp(t, fmt.Sprintf(`
application: {name: late-app, migration_step: FORCE_APPLICATION}
registries: {r: {address: %q}}
consumer: {references: {vault: {interface: org.weft.Vault, check: false}}}
`, reg), append(opts, weft.WithReference("vault", &fresh))...)
	if err := callWithin(&fresh, time.Second, false); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("after offline, a new consumer found the service: %v", err)
	}
	if code, body := qosGet(t, prov.QoSAddr(), "/online?service=org.weft.Vault"); code != 200 {
		t.Fatalf("online: %d %s", code, body)
	}
	if err := callWithin(&fresh, refound, true); err != nil {
		t.Fatalf("after online (new revision), the consumer found no provider: %v", err)
	}
}

// register_mode instance needs an application name; a bad mode or step is
// a config error naming the key and the values Dubbo knows.
func TestDiscoveryConfigErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{`
application: {register_mode: instance}
registries: {r: {address: "embedded:///tmp/x"}}
provider: {services: {vault: {interface: org.weft.Vault}}}`, "application.name"},
		{`
application: {name: a, register_mode: both}
provider: {services: {vault: {interface: org.weft.Vault}}}`, "want interface, instance or all"},
		{`
application: {name: a, migration_step: APP_FIRST}
provider: {services: {vault: {interface: org.weft.Vault}}}`, "FORCE_INTERFACE, APPLICATION_FIRST or FORCE_APPLICATION"},
		{`
consumer: {references: {vault: {interface: org.weft.Vault, url: "dubbo://127.0.0.1:1", migration_step: nope}}}`, "consumer.references.vault.migration_step"},
	}
	for _, tc := range cases {
		_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(tc.yaml)),
			weft.WithService("vault", &vault{}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %s\nerr %v, want it to mention %q", tc.yaml, err, tc.want)
		}
	}
}

// testLogger is a logger whose warnings and errors go to t.Log (shown when
// t fails, or with -v); infos are dropped. Its cleanup, registered before
// the Apps', runs after they stopped: what a straggler logs later is
// dropped (t.Log after the test panics).
func testLogger(t testing.TB) *slog.Logger { return testLoggerAt(t, slog.LevelWarn) }

// testLoggerAt is testLogger from level on: debug lines tell what a
// failure under load went through (they show only when t fails).
func testLoggerAt(t testing.TB, level slog.Level) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type tWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
