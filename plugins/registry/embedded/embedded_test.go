package embedded

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weftrpc/weft/kernel"
)

// childEnv makes the test binary a provider process: "exit" exits at once,
// anything else is the registry folder, and childURLEnv the URL to register.
const (
	childEnv    = "WEFT_EMBEDDED_TEST_CHILD"
	childURLEnv = "WEFT_EMBEDDED_TEST_CHILD_URL"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		runChild(v)
		return
	}
	goleak.VerifyTestMain(m)
}

// runChild is the provider process of the cross-process tests: it registers
// a URL, says so, and waits to be killed.
func runChild(v string) {
	if v == "exit" {
		os.Exit(0)
	}
	dir, raw := v, os.Getenv(childURLEnv)
	r := New(dir, 200*time.Millisecond, quiet())
	if err := r.Register(context.Background(), kernel.MustParseURL(raw)); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const hb = 200 * time.Millisecond

func open(t *testing.T, dir string) *Registry {
	t.Helper()
	r, err := Factory{Log: quiet()}.GetRegistry(kernel.MustParseURL("embedded://?heartbeat=200&dir=" + dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*Registry)
}

func provider(port int, params string) *kernel.URL {
	return kernel.MustParseURL(fmt.Sprintf("dubbo://127.0.0.1:%d/org.weft.Greeter?interface=org.weft.Greeter%s", port, params))
}

func consumer(params string) *kernel.URL {
	return kernel.MustParseURL("consumer://127.0.0.1/org.weft.Greeter?interface=org.weft.Greeter" + params)
}

// recorder is a NotifyListener keeping every list it got.
type recorder struct {
	mu    sync.Mutex
	lists [][]string
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1)} }

func (r *recorder) Notify(urls []*kernel.URL) {
	l := make([]string, len(urls))
	for i, u := range urls {
		l[i] = u.String()
	}
	r.mu.Lock()
	r.lists = append(r.lists, l)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

func (r *recorder) latest() ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lists) == 0 {
		return nil, false
	}
	return r.lists[len(r.lists)-1], true
}

// waitFor waits until the latest list is want (as a set), or fails at the
// deadline; it returns how long it waited.
func (r *recorder) waitFor(t *testing.T, within time.Duration, want ...*kernel.URL) time.Duration {
	t.Helper()
	w := make([]string, len(want))
	for i, u := range want {
		w[i] = u.String()
	}
	slices.Sort(w)
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if got, ok := r.latest(); ok && slices.Equal(got, w) {
			return time.Since(start)
		}
		select {
		case <-r.ch:
		case <-deadline.C:
			got, _ := r.latest()
			t.Fatalf("after %v the list is %q, want %q", within, got, w)
		}
	}
}

func TestRegisterUnregisterNotifiesFullLists(t *testing.T) {
	dir := t.TempDir()
	reg := open(t, dir)
	ctx := context.Background()
	rec := newRecorder()
	if err := reg.Subscribe(ctx, consumer(""), rec); err != nil {
		t.Fatal(err)
	}
	// The first list is delivered before Subscribe returns, empty or not.
	if got, ok := rec.latest(); !ok || len(got) != 0 {
		t.Fatalf("first list %q (delivered: %v), want empty", got, ok)
	}
	p1, p2 := provider(1, ""), provider(2, "")
	if err := reg.Register(ctx, p1); err != nil {
		t.Fatal(err)
	}
	d := rec.waitFor(t, 5*time.Second, p1)
	t.Logf("register seen after %v", d)
	if err := reg.Register(ctx, p2); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 5*time.Second, p1, p2)
	if err := reg.Unregister(ctx, p1); err != nil {
		t.Fatal(err)
	}
	d = rec.waitFor(t, 5*time.Second, p2)
	t.Logf("unregister seen after %v", d)

	// A second subscriber gets the current list right away.
	rec2 := newRecorder()
	if err := reg.Subscribe(ctx, consumer(""), rec2); err != nil {
		t.Fatal(err)
	}
	rec2.waitFor(t, 0, p2)

	// Heartbeats do not change the list: no notification for them. Wait
	// for several beats, observed through the file's content.
	n := rec.count()
	path := reg.entryPath(p2)
	first := readHeartbeat(t, path)
	waitUntil(t, 5*time.Second, func() bool { return readHeartbeat(t, path) >= first+3*hb.Milliseconds() })
	if rec.count() != n {
		t.Fatalf("heartbeats caused notifications: %q", rec.lists[n:])
	}
}

func readHeartbeat(t *testing.T, path string) int64 {
	t.Helper()
	e, ok := readEntry(path)
	if !ok {
		return 0
	}
	return e.Heartbeat
}

// waitUntil polls cond (the file system has no other signal for tests).
func waitUntil(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTwoRegistriesSeeEachOther(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ctx := context.Background()
	recA, recB := newRecorder(), newRecorder()
	pa, pb := provider(1, ""), provider(2, "")
	if err := a.Register(ctx, pa); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, consumer(""), recB); err != nil {
		t.Fatal(err)
	}
	recB.waitFor(t, 0, pa)
	if err := a.Subscribe(ctx, consumer(""), recA); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(ctx, pb); err != nil {
		t.Fatal(err)
	}
	recA.waitFor(t, 5*time.Second, pa, pb)
	recB.waitFor(t, 5*time.Second, pa, pb)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	recB.waitFor(t, 5*time.Second, pb)
}

func TestCloseUnregisters(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ctx := context.Background()
	p1, p2 := provider(1, ""), provider(2, "&group=g&version=1.0")
	for _, p := range []*kernel.URL{p1, p2} {
		if err := a.Register(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	if err := b.Subscribe(ctx, consumer(""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 0, p1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 5*time.Second)
	for _, p := range []*kernel.URL{p1, p2} {
		if _, err := os.Stat(a.entryPath(p)); !os.IsNotExist(err) {
			t.Fatalf("%s still has a file after Close: %v", p, err)
		}
	}
	if err := a.Register(ctx, p1); err == nil {
		t.Fatal("Register after Close succeeded")
	}
	if err := a.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestUnsubscribeStopsNotifications(t *testing.T) {
	reg := open(t, t.TempDir())
	ctx := context.Background()
	gone, stays := newRecorder(), newRecorder()
	for _, l := range []*recorder{gone, stays} {
		if err := reg.Subscribe(ctx, consumer(""), l); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Unsubscribe(ctx, consumer(""), gone); err != nil {
		t.Fatal(err)
	}
	n := gone.count()
	p := provider(1, "")
	if err := reg.Register(ctx, p); err != nil {
		t.Fatal(err)
	}
	stays.waitFor(t, 5*time.Second, p)
	if gone.count() != n {
		t.Fatalf("unsubscribed listener notified: %q", gone.lists[n:])
	}
}

func TestGarbageAndStaleEntries(t *testing.T) {
	dir := t.TempDir()
	reg := open(t, dir)
	ctx := context.Background()
	p := provider(1, "")
	folder := reg.ServiceDir(p.ServiceKey())
	if err := os.MkdirAll(filepath.Join(folder, "sub.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	garbage := map[string]string{
		"garbage.json": "\x00\x01 not json",
		"half.json":    `{"url":"dubbo://127.0.0.1:9/org.weft.Greeter?interface=org.weft.Gr`,
		"nourl.json":   `{"pid":1,"heartbeat":1}`,
		"badurl.json":  fmt.Sprintf(`{"url":"nonsense","heartbeat":%d,"interval":200}`, time.Now().Add(time.Hour).UnixMilli()),
		"notes.txt":    "hello",
		".tmp.json":    "{",
	}
	for name, content := range garbage {
		if err := os.WriteFile(filepath.Join(folder, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Unreadable (unless root).
	if err := os.WriteFile(filepath.Join(folder, "secret.json"), []byte("{}"), 0o000); err != nil {
		t.Fatal(err)
	}
	// Stale: from another host, heartbeat long gone.
	oldURL := provider(7, "")
	old := writeEntry(t, folder, "old", entry{URL: oldURL.String(), Host: "elsewhere", PID: 1, Heartbeat: time.Now().Add(-time.Minute).UnixMilli(), Interval: 200})
	// Dead pid on this host, fresh heartbeat.
	deadURL := provider(8, "")
	dead := writeEntry(t, folder, "dead", entry{URL: deadURL.String(), Host: reg.host, PID: deadPID(t), Heartbeat: time.Now().Add(time.Hour).UnixMilli(), Interval: 200})
	// Another interface in the same folder is not listed.
	other := kernel.MustParseURL("dubbo://127.0.0.1:9/org.weft.Other?interface=org.weft.Other")
	writeEntry(t, folder, "other", entry{URL: other.String(), Heartbeat: time.Now().Add(time.Hour).UnixMilli(), Interval: 200})

	rec := newRecorder()
	if err := reg.Subscribe(ctx, consumer(""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 0)
	if err := reg.Register(ctx, p); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 5*time.Second, p)
	for _, f := range []string{old, dead} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("stale entry %s not deleted: %v", filepath.Base(f), err)
		}
	}
	for name := range garbage {
		if _, err := os.Stat(filepath.Join(folder, name)); err != nil {
			t.Errorf("garbage %s should be left alone: %v", name, err)
		}
	}
}

func writeEntry(t *testing.T, folder, name string, e entry) string {
	t.Helper()
	data, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(folder, name+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=exit")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestWildcardGroupAndVersion(t *testing.T) {
	reg := open(t, t.TempDir())
	ctx := context.Background()
	v1 := provider(1, "&version=1.0")
	v2 := provider(2, "&version=2.0")
	g := provider(3, "&group=blue&version=1.0")
	other := kernel.MustParseURL("dubbo://127.0.0.1:4/org.weft.Other?interface=org.weft.Other&version=1.0")
	anyVersion, anyGroup, exact, groups := newRecorder(), newRecorder(), newRecorder(), newRecorder()
	for l, c := range map[*recorder]*kernel.URL{
		anyVersion: consumer("&version=*"),
		anyGroup:   consumer("&group=*&version=1.0"),
		exact:      consumer("&version=1.0"),
		groups:     consumer("&group=blue,red&version=1.0"),
	} {
		if err := reg.Subscribe(ctx, c, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*kernel.URL{v1, v2, g, other} {
		if err := reg.Register(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	anyVersion.waitFor(t, 5*time.Second, v1, v2)
	anyGroup.waitFor(t, 5*time.Second, v1, g)
	exact.waitFor(t, 5*time.Second, v1)
	groups.waitFor(t, 5*time.Second, g)
}

func TestConcurrentRegistries(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	regs := []*Registry{open(t, dir), open(t, dir), open(t, dir)}
	rec := newRecorder()
	if err := regs[0].Subscribe(ctx, consumer(""), rec); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var want []*kernel.URL
	for i, r := range regs {
		for j := range 10 {
			p := provider(1000+10*i+j, "")
			if j%2 == 0 {
				want = append(want, p)
			}
			wg.Go(func() {
				for range 5 {
					r.Register(ctx, p)
					r.Unregister(ctx, p)
				}
				if j%2 == 0 {
					r.Register(ctx, p)
				}
			})
		}
	}
	wg.Wait()
	rec.waitFor(t, 5*time.Second, want...)
}

func TestFactoryFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	abs := filepath.Join(tmp, "abs", "dir")
	for _, c := range []struct{ url, want string }{
		{"embedded://" + abs, abs},
		{"embedded://?dir=" + filepath.Join(tmp, "param"), filepath.Join(tmp, "param")},
		{"embedded://", filepath.Join(tmp, "weft-registry")},
	} {
		r, err := Factory{}.GetRegistry(kernel.MustParseURL(c.url))
		if err != nil {
			t.Fatal(c.url, err)
		}
		got := r.(*Registry)
		if got.Dir() != c.want || got.heartbeat != DefaultHeartbeat {
			t.Errorf("%s: dir %s heartbeat %v, want %s %v", c.url, got.Dir(), got.heartbeat, c.want, DefaultHeartbeat)
		}
		if fi, err := os.Stat(c.want); err != nil || !fi.IsDir() {
			t.Errorf("%s: folder not created: %v", c.url, err)
		}
		r.Close()
	}
}

// child starts a provider process registering p in dir and waits until it
// has.
func child(t *testing.T, dir string, p *kernel.URL) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childURLEnv+"="+p.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait() // an error when the test reaped it already
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q %v", line, err)
	}
	return cmd
}

// TestCrossProcessKill runs providers in other processes and kills them with
// SIGKILL. A reaped one (its pid is gone) is dropped on the subscriber's next
// scan; an unreaped one (a zombie still has its pid) is dropped when its
// heartbeat is three intervals old.
func TestCrossProcessKill(t *testing.T) {
	dir := t.TempDir()
	reg := open(t, dir)
	ctx := context.Background()
	reaped, zombie := provider(1, ""), provider(2, "")
	cr := child(t, dir, reaped)
	cz := child(t, dir, zombie)
	rec := newRecorder()
	if err := reg.Subscribe(ctx, consumer(""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 0, reaped, zombie)

	// Deadline: three heartbeats plus scheduling slack for -race on a
	// loaded machine; the measured time is logged.
	within := staleBeats*hb + time.Second

	if err := cr.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cr.Wait()
	d := rec.waitFor(t, within, zombie)
	t.Logf("kill -9, reaped (dead pid): dropped after %v (heartbeat %v)", d, hb)

	if err := cz.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d = rec.waitFor(t, within)
	t.Logf("kill -9, not reaped (stale heartbeat): dropped after %v (heartbeat %v, stale after %v)", d, hb, staleBeats*hb)
	if _, err := os.Stat(reg.entryPath(zombie)); !os.IsNotExist(err) {
		t.Fatalf("stale entry not deleted: %v", err)
	}
}
