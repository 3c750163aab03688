package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
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

// weft run --check checks what New checks and the ports, and exits without
// starting anything.
func TestRunCheck(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base.yaml", "qos: {enable: false}\nprovider: {services: {echo: {interface: org.weft.bench.EchoService}}}\n")
	for _, c := range []struct {
		files      []string
		code       int
		out, errIn string
	}{
		{[]string{base}, 0, "base.yaml: ok (services: echo; references: none; WASM filters: none)", ""},
		{[]string{base, write("port.yaml", fmt.Sprintf("protocols: {dubbo: {port: %d}}\n", port))}, 1, "",
			fmt.Sprintf("protocols.dubbo.port: cannot listen on 127.0.0.1:%d", port)},
		{[]string{base, write("wasm.yaml", "wasm: {filters: {f: {path: missing.wasm}}}\n")}, 1, "", "missing.wasm"},
		{[]string{base, write("env.yaml", "consumer: {references: {r: {interface: x.Y, url: \"dubbo://${WEFTTEST_NO_SUCH_HOST}:1\"}}}\n")}, 1, "",
			"the environment variable WEFTTEST_NO_SUCH_HOST is not set"},
	} {
		args := []string{"run", "--check"}
		for _, f := range c.files {
			args = append(args, "-c", f)
		}
		var out, errb bytes.Buffer
		code := cli(args, &out, &errb)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.errIn) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want code %d, %q, %q", c.files, code, out.String(), errb.String(), c.code, c.out, c.errIn)
		}
	}
	// Nothing was started: the held port is the only listener, and a
	// second check finds the same.
	if code := cli([]string{"run", "--check", "-c", base}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("second check: code %d", code)
	}
}
