package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// child is a process the test started, with its stdout lines.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	addr   string // from its "listening ADDR" line
	mu     sync.Mutex
	lines  []string
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...)}
	first := make(chan string, 1)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if addr, ok := strings.CutPrefix(line, "listening "); ok {
				first <- addr
				continue
			}
			c.mu.Lock()
			c.lines = append(c.lines, line)
			c.mu.Unlock()
		}
		close(first)
	}()
	select {
	case addr, ok := <-first:
		if !ok {
			t.Fatalf("%s exited before listening: %s", filepath.Base(bin), c.stderr.String())
		}
		c.addr = addr
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30 s: %s", filepath.Base(bin), c.stderr.String())
	}
	return nil
}

// otlpSpan is a line of otlpreceiver.
type otlpSpan struct {
	Service  string `json:"service"`
	TraceID  string `json:"trace_id"`
	SpanID   string `json:"span_id"`
	ParentID string `json:"parent_span_id"`
	Name     string `json:"name"`
	Kind     int32  `json:"kind"` // OTLP: 2 server, 3 client
}

func (c *child) spans(t *testing.T) []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []otlpSpan
	for _, l := range c.lines {
		var s otlpSpan
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("receiver printed %q: %v", l, err)
		}
		out = append(out, s)
	}
	return out
}

// A trace crosses processes: a dubbo-go consumer in the test's process
// calls a weft provider in a process of its own (tracehop), whose
// implementation calls, through its weft consumer, a weft provider back in
// the test's process. The hop exports its spans over OTLP/HTTP to a
// receiver in a third process; the test's parties keep theirs in memory.
// One trace id throughout, and each span the child of the one before it:
// dubbo-go's client span, the hop's server span, the hop's client span,
// the last provider's server span.
func TestTracingAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-C", "../../tracing-otlp", "-o", dir, "./internal/cmd/tracehop", "./internal/cmd/otlpreceiver").CombinedOutput()
	if err != nil {
		t.Fatalf("go build the tracing children: %v\n%s", err, out)
	}
	receiver := startChild(t, filepath.Join(dir, "otlpreceiver"))

	tpEnd, expEnd := memTracer(t)
	endAddr, endPort := freeAddr(t)
	startWeft(t, weft.WithTracerProvider(tpEnd), weft.WithService("end", traceEnd{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
tracing: {enable: true}
protocols: {dubbo: {port: %d}}
provider: {services: {end: {interface: org.weft.trace.End}}}
`, endPort))))
	hop := startChild(t, filepath.Join(dir, "tracehop"), "-next", "dubbo://"+endAddr, "-otlp", "http://"+receiver.addr+"/v1/traces")

	tpG, expG := memTracer(t)
	useGlobalTracer(t, tpG)
	c, err := dubbogo.NewClient("dubbo://"+hop.addr, dubbogo.WithTracing())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, root := tpG.Tracer("interop-test").Start(context.Background(), "root")
	got, err := c.Echo(ctx, "x")
	root.End()
	if err != nil {
		t.Fatalf("dubbo-go -> weft (child) -> weft: %v\n%s", err, hop.stderr.String())
	}

	// Stopping the hop flushes its batch of spans to the receiver.
	hop.cmd.Process.Signal(syscall.SIGTERM)
	var hopSpans []otlpSpan
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if hopSpans = receiver.spans(t); len(hopSpans) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d spans from the hop, want 2; hop stderr:\n%s", len(hopSpans), hop.stderr.String())
		}
	}
	pick := func(name string, kind int32) otlpSpan {
		for _, s := range hopSpans {
			if s.Name == name && s.Kind == kind {
				return s
			}
		}
		t.Fatalf("no OTLP span %q of kind %d among %+v", name, kind, hopSpans)
		return otlpSpan{}
	}
	hopServer := pick(dubbogo.Interface+"/echo", 2)
	hopClient := pick("org.weft.trace.End/echo", 3)
	dgClient := onlySpan(t, expG, "echo", trace.SpanKindClient)
	endServer := onlySpan(t, expEnd, "org.weft.trace.End/echo", trace.SpanKindServer)

	traceID := onlySpan(t, expG, "root", trace.SpanKindInternal).SpanContext.TraceID().String()
	type link struct {
		name                   string
		trace, span, parent    string
		wantParent, parentName string
	}
	stub := func(s tracetest.SpanStub) (string, string, string) {
		return s.SpanContext.TraceID().String(), s.SpanContext.SpanID().String(), s.Parent.SpanID().String()
	}
	dgT, dgS, _ := stub(dgClient)
	endT, _, endP := stub(endServer)
	for _, l := range []link{
		{"dubbo-go client", dgT, dgS, "", "", ""},
		{"hop server (other process)", hopServer.TraceID, hopServer.SpanID, hopServer.ParentID, dgS, "dubbo-go client"},
		{"hop client (other process)", hopClient.TraceID, hopClient.SpanID, hopClient.ParentID, hopServer.SpanID, "hop server"},
		{"last server", endT, "", endP, hopClient.SpanID, "hop client"},
	} {
		if l.trace != traceID {
			t.Errorf("%s is in trace %s, want %s", l.name, l.trace, traceID)
		}
		if l.wantParent != "" && l.parent != l.wantParent {
			t.Errorf("%s has parent %s, want the %s %s", l.name, l.parent, l.parentName, l.wantParent)
		}
	}
	if hopServer.Service != "weft-hop" {
		t.Errorf("the hop's spans are under service.name %q, want its application name weft-hop", hopServer.Service)
	}
	if !strings.HasPrefix(got, "x|00-"+traceID+"-"+hopClient.SpanID) {
		t.Errorf("the last provider received %q", got)
	}
}
