package adaptivelb

import (
	"context"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// reports records what the filter tells the balancers' store.
type reports struct {
	picked, failed []string
	answered       []string // provider + " " + report
	remaining      map[string]int64
}

func (r *reports) Picked(p string) { r.picked = append(r.picked, p) }
func (r *reports) Failed(p string) { r.failed = append(r.failed, p) }
func (r *reports) Answered(p, report string, rt time.Duration) {
	r.answered = append(r.answered, p+" "+report)
}
func (r *reports) SetRemaining(p, method string, remaining, inflight int64) {
	if r.remaining == nil {
		r.remaining = map[string]int64{}
	}
	r.remaining[p+" "+method] = remaining
}

type next struct {
	url     *kernel.URL
	reply   map[string]any
	gotLoad string
	gotSvc  string
	err     error
}

func (n *next) URL() *kernel.URL  { return n.url }
func (n *next) IsAvailable() bool { return true }
func (n *next) Destroy()          {}
func (n *next) Invoke(_ context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	n.gotLoad = inv.AttachmentString(extension.KeyAdaptiveLoad)
	n.gotSvc = inv.AttachmentString(extension.KeyAdaptiveService)
	m := map[string]any{}
	for k, v := range n.reply {
		m[k] = v
	}
	return kernel.Result{Value: "ok", Attachments: m}, n.err
}

// A Java provider's report (ProfilerServerFilter's format, Java's
// Double.toString) is read into the metrics the adaptive balancer uses,
// and stripped from what the application sees.
func TestConsumerReadsJavaReport(t *testing.T) {
	m := &reports{}
	f := New(m)
	u := kernel.MustParseURL("dubbo://10.0.0.1:20880/org.apache.dubbo.demo.DemoService?loadbalance=adaptive")
	report := "curTime:" + strconv.FormatInt(time.Now().UnixMilli(), 10) + ",load:37.5"
	n := &next{url: u, reply: map[string]any{extension.KeyAdaptiveLoad: report, "other": "kept"}}
	res, err := f.Invoke(context.Background(), n, &kernel.Invocation{Method: "sayHello"})
	if err != nil {
		t.Fatal(err)
	}
	if n.gotLoad != "mem,load" {
		t.Fatalf("request asked with %q, want Java's \"mem,load\"", n.gotLoad)
	}
	if _, left := res.Attachments[extension.KeyAdaptiveLoad]; left || res.Attachments["other"] != "kept" {
		t.Fatalf("attachments the application sees: %v", res.Attachments)
	}
	// The report reaches the store as Java wrote it (cluster's tests
	// read it: TestAdaptiveReportsAsJavaWritesThem).
	if len(m.picked) != 1 || len(m.answered) != 1 || m.answered[0] != u.String()+" "+report || len(m.failed) != 0 {
		t.Fatalf("store heard picked %v, answered %v, failed %v", m.picked, m.answered, m.failed)
	}
	n.err = kernel.Errorf(kernel.CodeTimeout, "late")
	f.Invoke(context.Background(), n, &kernel.Invocation{Method: "sayHello"})
	if len(m.failed) != 1 {
		t.Fatalf("a timeout was not counted failed: %v", m.failed)
	}
}

func TestConsumerP2CReadsRemaining(t *testing.T) {
	m := &reports{}
	f := New(m)
	u := kernel.MustParseURL("tri://10.0.0.1:50051/S?loadbalance=p2c")
	// dubbo-go sends decimal strings; over Triple a header may come as a
	// list of one.
	n := &next{url: u, reply: map[string]any{extension.KeyAdaptiveRemaining: []string{"7"}, extension.KeyAdaptiveInflight: "3"}}
	res, err := f.Invoke(context.Background(), n, &kernel.Invocation{Method: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if n.gotSvc != "1" {
		t.Fatalf("request carried adaptive-service.enabled %q, want 1", n.gotSvc)
	}
	if len(res.Attachments) != 0 {
		t.Fatalf("report left for the application: %v", res.Attachments)
	}
	if r, ok := m.remaining[u.String()+" m"]; !ok || r != 7 {
		t.Fatalf("remaining %d, %v; want 7", r, ok)
	}
}

func TestConsumerOtherBalancersPassThrough(t *testing.T) {
	f := New(&reports{})
	n := &next{url: kernel.MustParseURL("dubbo://10.0.0.1:20880/S?loadbalance=random&m.loadbalance=adaptive")}
	if _, err := f.Invoke(context.Background(), n, &kernel.Invocation{Method: "x"}); err != nil || n.gotLoad != "" || n.gotSvc != "" {
		t.Fatalf("random: asked for reports (%q, %q), err %v", n.gotLoad, n.gotSvc, err)
	}
	// A method's own setting counts.
	if _, err := f.Invoke(context.Background(), n, &kernel.Invocation{Method: "m"}); err != nil || n.gotLoad != "mem,load" {
		t.Fatalf("m.loadbalance=adaptive: asked %q, err %v", n.gotLoad, err)
	}
}

var javaReport = regexp.MustCompile(`^curTime:(\d+),load:(\d+(\.\d+)?)$`)

// The provider answers in Java's format, which Java's consumer parses
// (curTime an integer, load digits with at most one dot); a call that does
// not ask gets nothing.
func TestProviderReportsAsJava(t *testing.T) {
	f := &provider{load: newLoadAverage(func() (float64, bool) { return 1.5, true })}
	n := &next{url: kernel.MustParseURL("dubbo://127.0.0.1:20880/S")}
	res, err := f.Invoke(context.Background(), n, &kernel.Invocation{Method: "m"})
	if err != nil || len(res.Attachments) != 0 {
		t.Fatalf("unasked: %v, %v", res.Attachments, err)
	}
	inv := &kernel.Invocation{Method: "m"}
	inv.SetAttachment(extension.KeyAdaptiveLoad, "mem,load")
	before := time.Now().UnixMilli()
	res, err = f.Invoke(context.Background(), n, inv)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := res.Attachments[extension.KeyAdaptiveLoad].(string)
	g := javaReport.FindStringSubmatch(rep)
	if g == nil {
		t.Fatalf("report %q is not in Java's format", rep)
	}
	ms, _ := strconv.ParseInt(g[1], 10, 64)
	load, _ := strconv.ParseFloat(g[2], 64)
	if ms < before || ms > time.Now().UnixMilli() || load != 1.5*100/float64(runtime.NumCPU()) {
		t.Fatalf("report %q: time %d (called at %d), load %v want %v", rep, ms, before, load, 1.5*100/float64(runtime.NumCPU()))
	}
	// A framework failure gets no report, a business error does.
	n.err = kernel.Errorf(kernel.CodeNetwork, "down")
	if res, _ = f.Invoke(context.Background(), n, inv); res.Attachments[extension.KeyAdaptiveLoad] != nil {
		t.Fatal("a framework failure carried a report")
	}
	n.err = kernel.BizError(context.DeadlineExceeded)
	if res, _ = f.Invoke(context.Background(), n, inv); res.Attachments[extension.KeyAdaptiveLoad] == nil {
		t.Fatal("a business error carried no report")
	}
}

func TestLoadAverageReadOncePerSecond(t *testing.T) {
	reads := 0
	l := newLoadAverage(func() (float64, bool) { reads++; return 0, false })
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		if r := l.report(t0.Add(time.Duration(i) * time.Millisecond)); !strings.HasSuffix(r, ",load:-1") {
			t.Fatalf("no load average: %q, want load:-1 as Java's", r)
		}
	}
	l.report(t0.Add(1500 * time.Millisecond))
	if reads != 2 {
		t.Fatalf("%d reads in 1.5 s, want 2", reads)
	}
}

func TestReadLoadAverage(t *testing.T) {
	v, ok := readLoadAverage()
	if runtime.GOOS == "linux" && (!ok || v < 0) {
		t.Fatalf("load average on Linux: %v, %v", v, ok)
	}
}

func TestReportAllocatesOnce(t *testing.T) {
	l := newLoadAverage(func() (float64, bool) { return 0.37, true })
	now := time.Now()
	l.report(now)
	if n := testing.AllocsPerRun(100, func() { l.report(now) }); n != 1 {
		t.Fatalf("%v allocations per report, want 1", n)
	}
}
