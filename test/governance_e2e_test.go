package test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// zkAddr is ZooKeeper's address for the tests that need one (.ci/run starts
// it): skipped without, failed without under CI.
func zkAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ZOOKEEPER_TEST_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ZOOKEEPER_TEST_ADDR is not set but CI is: .ci/run starts ZooKeeper and sets it")
		}
		t.Skip("ZOOKEEPER_TEST_ADDR is not set: start test/zookeeper/zk.sh and set ZOOKEEPER_TEST_ADDR=127.0.0.1:2181")
	}
	return addr
}

// Dubbo Admin's three rule formats, written into the config center under
// Dubbo's keys while a consumer calls two providers without pause: each
// changes where the calls go within 5 s, no call fails, and a malformed
// rule is rejected (its reason logged) with routing unchanged.
func TestGovernanceRulesUnderLoad(t *testing.T) {
	noLeaks(t)
	addr := zkAddr(t)
	ns := fmt.Sprintf("weft-gov-%d", time.Now().UnixNano())
	ccURL := fmt.Sprintf("zookeeper://%s?namespace=%s", addr, ns)
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	a, b := &node{name: "a"}, &node{name: "b"}
	var ports []string
	for _, n := range []*node{a, b} {
		addr := freePort(t)
		ports = append(ports, addr[strings.LastIndexByte(addr, ':')+1:])
		startApp(t, fmt.Sprintf(`
application: {name: gov-prov}
registries: {r: {address: %q}}
protocols: {dubbo: {port: %s}}
provider: {services: {node: {interface: org.weft.Node}}}
`, reg, ports[len(ports)-1]), weft.WithService("node", n))
	}
	portA, portB := ports[0], ports[1]

	var logs syncBuffer
	var c nodeClient
	startApp(t, fmt.Sprintf(`
application: {name: gov-client}
config_center: {address: %q, data_id: gov-client.yaml, check: false}
registries: {r: {address: %q}}
consumer: {references: {node: {interface: org.weft.Node, retries: 2, params: {dubbo.tag: gray}}}}
`, ccURL, reg), weft.WithReference("node", &c), weft.WithPlugins(zookeeper.Plugin()), weft.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	cc, err := zookeeper.ConfigFactory{Log: quietLog}.GetDynamicConfiguration(kernel.MustParseURL(ccURL))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	publish := func(key, doc string) {
		t.Helper()
		if err := cc.PublishConfig(context.Background(), key, "dubbo", doc); err != nil {
			t.Fatal(err)
		}
	}

	// Load: one caller, failures counted.
	ld := startLoad(1, time.Millisecond, func() error { _, err := c.Who(context.Background(), "x"); return err })
	defer func() {
		if calls, failed, last := ld.stop(); failed > 0 {
			t.Errorf("%d of %d calls failed while rules changed; last: %v", failed, calls, last)
		}
	}()
	// onlyTo waits (at most 5 s) until new calls reach only want's node.
	onlyTo := func(what string, want, other *node) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			before := other.calls.Load()
			wantBefore := want.calls.Load()
			time.Sleep(300 * time.Millisecond)
			if other.calls.Load() == before && want.calls.Load() > wantBefore {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: within 5 s the calls did not go to %s only (%s %d, %s %d calls)", what, want.name, want.name, want.calls.Load(), other.name, other.calls.Load())
			}
		}
	}
	both := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			a0, b0 := a.calls.Load(), b.calls.Load()
			time.Sleep(300 * time.Millisecond)
			if a.calls.Load() > a0 && b.calls.Load() > b0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: within 5 s the calls did not reach both providers again", what)
			}
		}
	}
	both("no rule")

	// 1. A condition rule (v3.0), service scope: interface:version:group.
	condKey := "org.weft.Node::.condition-router"
	publish(condKey, fmt.Sprintf(`configVersion: v3.0
scope: service
key: org.weft.Node
enabled: true
force: true
runtime: true
conditions:
  - "=> port = %s"
`, portA))
	onlyTo("condition rule", a, b)
	// A malformed document under the same key is rejected; the rule stays.
	publish(condKey, "configVersion: v3.0\nconditions: [\"method = => host\"\n")
	time.Sleep(time.Second)
	onlyTo("after a malformed condition rule", a, b)
	if !strings.Contains(logs.String(), "rule rejected") || !strings.Contains(logs.String(), condKey) {
		t.Errorf("the malformed rule's rejection was not logged with its key:\n%s", logs.String())
	}
	if err := cc.PublishConfig(context.Background(), condKey, "dubbo", ""); err != nil {
		t.Fatal(err)
	}
	both("condition rule deleted")

	// 2. A tag rule (v3.0), under the providers' application: the
	// consumer asks for gray (its dubbo.tag), which the rule gives b.
	publish("gov-prov.tag-router", fmt.Sprintf(`configVersion: v3.0
force: true
enabled: true
key: gov-prov
tags:
  - name: gray
    addresses: ["127.0.0.1:%s"]
`, portB))
	onlyTo("tag rule", b, a)
	if err := cc.PublishConfig(context.Background(), "gov-prov.tag-router", "dubbo", ""); err != nil {
		t.Fatal(err)
	}
	both("tag rule deleted")

	// 3. An override rule (v3.0), under the consumer's application: b
	// disabled for this consumer.
	publish("gov-client.configurators", fmt.Sprintf(`configVersion: v3.0
scope: application
key: gov-client
enabled: true
configs:
  - side: consumer
    addresses: ["0.0.0.0"]
    providerAddresses: ["127.0.0.1:%s"]
    parameters: {disabled: true}
`, portB))
	onlyTo("override rule", a, b)
	if err := cc.PublishConfig(context.Background(), "gov-client.configurators", "dubbo", ""); err != nil {
		t.Fatal(err)
	}
	both("override rule deleted")
}
