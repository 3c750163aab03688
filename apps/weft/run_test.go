package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCLI runs `weft run -c FILE` on doc; a run that does not return (an App
// started idle) fails the test instead of hanging it.
func runCLI(t *testing.T, doc string) (int, string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "weft.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- cli([]string{"run", "-c", cfg}, &out, &errb) }()
	select {
	case code := <-done:
		return code, errb.String()
	case <-time.After(10 * time.Second):
		t.Fatalf("weft run with %q is still running after 10 s; want it to fail at start", doc)
		return 0, ""
	}
}

func TestRunRejectsEmptyConfig(t *testing.T) {
	for _, doc := range []string{"", "# nothing yet\n", "consumer: {timeout: 500}\n"} {
		code, stderr := runCLI(t, doc)
		for _, w := range []string{"no services or references configured", "provider.services", "consumer.references",
			"quick start in README.md", "implementations registered but not exported: echo, greeter"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", doc, stderr, w)
			}
		}
		if code != 1 {
			t.Errorf("%q: exit code %d, want 1", doc, code)
		}
	}
}

func TestRunRejectsBadValue(t *testing.T) {
	code, stderr := runCLI(t, "provider: {services: {greeter: {interface: org.example.Greeter, executes: -1}}}\n")
	if code != 1 || !strings.Contains(stderr, "provider.services.greeter.executes: -1 is not allowed: want >= 0") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}

// weft run carries the Nacos plugin: a config naming a Nacos registry is
// valid (here New fails on another key, found in the same pass, before
// anything connects), not "lives in registry-nacos, which this program does
// not link".
func TestRunHasNacos(t *testing.T) {
	code, stderr := runCLI(t, `registries: {n: {address: "nacos://127.0.0.1:1"}}
consumer: {cluster: failwhale}
provider: {services: {greeter: {interface: org.example.Greeter}}}
`)
	if code != 1 || !strings.Contains(stderr, `consumer.cluster: unknown cluster extension "failwhale"`) || strings.Contains(stderr, "registries.n") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}

// weft run carries the ZooKeeper plugin too (as TestRunHasNacos).
func TestRunHasZookeeper(t *testing.T) {
	code, stderr := runCLI(t, `registries: {z: {address: "zookeeper://127.0.0.1:1"}}
consumer: {cluster: failwhale}
provider: {services: {greeter: {interface: org.example.Greeter}}}
`)
	if code != 1 || !strings.Contains(stderr, `consumer.cluster: unknown cluster extension "failwhale"`) || strings.Contains(stderr, "registries.z") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}
