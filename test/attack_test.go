package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftrpc/weft/test/attack"
)

// TestConnectionAttacks runs the attack suite (package attack) against
// the echo provider, each case on a fresh provider process, and holds
// every case to issue 22's bounds: the provider's RSS grows by at most
// 64 MiB, it closes every attacking connection within 5 s (slowloris:
// within 30 s, by the frame-read deadline), and the legitimate probe
// beside the attack gets at least 99% of its calls answered with a p99
// within 50 ms of its own idle p99 measured just before (a case that
// misses only these time bounds runs once more, on a fresh provider).
func TestConnectionAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("the attack suite takes minutes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "echo")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/weftrpc/weft/apps/examples/echo").CombinedOutput(); err != nil {
		t.Fatalf("go build apps/examples/echo: %v\n%s", err, out)
	}
	for _, c := range attack.Cases() {
		t.Run(c.Proto+"/"+c.Name, func(t *testing.T) {
			// The time bounds (the probe's p99, how soon every attacking
			// connection is closed) are the ones a busy machine can break
			// alone (both cores loaded, -race in the attacker's process):
			// a case that misses only those runs again on a fresh
			// provider, and fails if it misses them twice.
			for attempt := 1; ; attempt++ {
				slow, ok := runAttackCase(t, bin, c, attempt)
				if ok || !slow || attempt == 2 {
					if !ok {
						t.Fail()
					}
					return
				}
				t.Logf("attempt %d: only the probe's p99 missed its bound; once more on a fresh provider", attempt)
			}
		})
	}
}

// runAttackCase runs c once against a fresh provider and reports whether
// it held every bound, and whether time bounds (the probe's p99, the
// closes' time) were the only ones missed.
func runAttackCase(t *testing.T, bin string, c attack.Case, attempt int) (slow, ok bool) {
	t.Helper()
	p, err := attack.StartProvider(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	r := attack.Run(context.Background(), p.Target, c)
	t.Log(r)
	if len(r.Errs) > 0 {
		t.Fatalf("the attack itself failed (%d): %v", len(r.Errs), r.Errs[0])
	}
	if !p.Alive() {
		t.Fatalf("the provider died: %s", p.Output())
	}
	var errs []string
	if g := r.Growth(); g > 64<<20 {
		errs = append(errs, fmt.Sprintf("RSS grew by %d MiB, over 64 MiB", g>>20))
	}
	within := c.CloseWithin
	if within == 0 {
		within = 5 * time.Second
	}
	late := r.Closed == r.Conns && r.CloseMax > within
	if r.Closed < r.Conns {
		errs = append(errs, fmt.Sprintf("%d of %d attacking connections closed, the last after %v: want all within %v", r.Closed, r.Conns, r.CloseMax, within))
	}
	if r.Probe.OK() < 0.99 {
		errs = append(errs, fmt.Sprintf("the probe's calls: %d of %d failed (%s), want at least 99%% answered", r.Probe.Failed, r.Probe.Calls, r.Probe.FirstErr))
	}
	p99 := r.Probe.P99 > r.Idle.P99+50*time.Millisecond
	slow = p99 || late
	if slow && (len(errs) > 0 || attempt == 2) {
		if late {
			errs = append(errs, fmt.Sprintf("all %d attacking connections closed, the last after %v: want within %v", r.Conns, r.CloseMax, within))
		}
		if p99 {
			errs = append(errs, fmt.Sprintf("the probe's p99 %v under attack, over its idle %v + 50 ms", r.Probe.P99, r.Idle.P99))
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
	if len(errs) > 0 && os.Getenv("WEFTTEST_ATTACK_VERBOSE") != "" {
		t.Logf("provider output:\n%s", p.Output())
	}
	return slow && len(errs) == 0, len(errs) == 0 && !slow
}
