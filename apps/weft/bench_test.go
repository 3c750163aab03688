package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/echo/echoservice"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
)

// weft bench against a real echo provider: on a terminal, one line a
// second with that second's qps, p99 and errors; at the end the summary
// and a latency histogram whose rows add up to the calls made.
func TestBenchLiveLinesAndHistogram(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		weft.WithService("echo", &echoservice.Service{}), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider: {services: {echo: {interface: org.weft.bench.EchoService}}}
`, port))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	// The live lines, as a terminal gets them.
	var progress bytes.Buffer
	p := dubbo.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.Destroy()
	iv, err := p.Refer(context.Background(), kernel.MustParseURL(fmt.Sprintf("dubbo://127.0.0.1:%d/org.weft.bench.EchoService?interface=org.weft.bench.EchoService&timeout=1000", port)))
	if err != nil {
		t.Fatal(err)
	}
	defer iv.Destroy()
	res, hist := runBench(iv, callString, "echo", strings.Repeat("x", 64), 2, 100*time.Millisecond, 2500*time.Millisecond, &progress)
	lines := regexp.MustCompile(`(?m)^ *[0-9.]+s +[0-9]+ qps  p99 +[0-9.]+ ms  0 errors$`).FindAllString(progress.String(), -1)
	// 2.5 s: a line at 1 s, 2 s and 2.5 s; a sleep that overshoots on a
	// busy machine may merge the last two.
	if len(lines) < 2 || len(lines) > 3 {
		t.Fatalf("want a live line a second over 2.5 s, got:\n%s", progress.String())
	}
	if res.Calls == 0 || res.Errors != 0 || hist.n != res.Calls {
		t.Fatalf("result %+v, histogram of %d calls", res, hist.n)
	}

	// -json: the client's own CPU and its connections beside qps, for the
	// peers' matrix.
	var js, errb bytes.Buffer
	url := fmt.Sprintf("dubbo://127.0.0.1:%d/org.weft.bench.EchoService", port)
	if code := cli([]string{"bench", "-json", "-c", "2", "-connections", "2", "-d", "500ms", "-warmup", "100ms", "-size", "16", url}, &js, &errb); code != 0 {
		t.Fatalf("bench -json: %d %s", code, errb.String())
	}
	var br BenchResult
	if err := json.Unmarshal(js.Bytes(), &br); err != nil || br.Connections != 2 || br.Calls == 0 || br.ClientCPUSeconds <= 0 || br.ClientCPUPercent <= 0 || br.ClientCPUPercent > 400 {
		t.Fatalf("bench -json: %v %s", err, js.String())
	}

	var out bytes.Buffer
	printHistogram(&out, hist)
	rows := regexp.MustCompile(`(?m)^ *([0-9.]+) - +([0-9.]+)  #* +([0-9]+)$`).FindAllStringSubmatch(out.String(), -1)
	if !strings.HasPrefix(out.String(), "latency (ms)") || len(rows) == 0 {
		t.Fatalf("histogram:\n%s", out.String())
	}
	var sum uint64
	for _, r := range rows {
		var n uint64
		fmt.Sscan(r[3], &n)
		sum += n
	}
	if sum != res.Calls {
		t.Fatalf("histogram rows add to %d, %d calls were made:\n%s", sum, res.Calls, out.String())
	}
}

// weft bench through a reference (a registry and an interface, or
// -config and a reference id), with attachments, a version and any method
// with JSON arguments.
func TestBenchThroughReference(t *testing.T) {
	dir := t.TempDir()
	startApp(t, fmt.Sprintf(`
qos: {enable: false}
registries: {local: {address: "embedded://%s"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.weft.Greeter, version: "2.0"}
    echo: {interface: org.weft.bench.EchoService}
`, dir), weft.WithService("greeter", langGreeter{}), weft.WithService("echo", &echoservice.Service{}))
	cfg := dir + "/consumer.yaml"
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("registries: {local: {address: \"embedded://%s\"}}\nconsumer: {references: {e: {interface: org.weft.bench.EchoService, loadbalance: roundrobin}}}\n", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-version", "2.0", "-a", "lang=fr", "-method", "greet", "-args", `["Ana"]`, "embedded://" + dir, "org.weft.Greeter"},
		{"-config", cfg, "-a", "k=v", "-size", "64", "e"},
	} {
		var out, errb bytes.Buffer
		full := append([]string{"bench", "-json", "-c", "2", "-d", "200ms", "-warmup", "50ms"}, args...)
		if code := cli(full, &out, &errb); code != 0 {
			t.Fatalf("%v: code %d, stderr %q", args, code, errb.String())
		}
		var res BenchResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Calls == 0 || res.Errors != 0 {
			t.Fatalf("%v: %+v %v (stdout %q)", args, res, err, out.String())
		}
	}
	var errb bytes.Buffer
	if code := cli([]string{"bench", "-args", "{", "embedded://" + dir, "org.weft.Greeter"}, io.Discard, &errb); code != 2 ||
		!strings.Contains(errb.String(), "-args must be a JSON array") {
		t.Fatalf("bad -args: code %d, stderr %q", code, errb.String())
	}
}
