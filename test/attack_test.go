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
// every case to issue 22's bounds: the attack itself runs, the provider
// survives, closes every attacking connection, and answers at least 99%
// of a legitimate probe's calls beside the attack; and, as measured
// bounds, its RSS grows by at most 64 MiB, the attacking connections are
// all closed within 5 s (slowloris: within 30 s, by the frame-read
// deadline), and the probe's p99 stays within 50 ms of its own idle p99
// measured just before.
//
// The measured bounds are the ones a busy machine can break alone (both
// cores loaded, -race in the attacker's process; the RSS peak of the Triple
// "large answers" case is that of up to `threads` answers in flight and
// the collector's lag: 19 to 93 MiB seen under stress-ng). A case that
// misses one runs again on a fresh provider, at most three times in all,
// and fails when it misses the same bound twice: the median of three
// runs, where a real leak or stall misses it every time.
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
			missed := map[string]int{}
			for attempt := 1; attempt <= 3; attempt++ {
				soft := runAttackCase(t, bin, c)
				if t.Failed() || len(soft) == 0 {
					return
				}
				for bound, msg := range soft {
					if missed[bound]++; missed[bound] == 2 {
						t.Errorf("%s (missed on two runs)", msg)
					}
				}
				if t.Failed() {
					return
				}
				t.Logf("run %d missed %d measured bound(s); once more on a fresh provider", attempt, len(soft))
			}
			t.Errorf("each of three runs missed a measured bound: %v", missed)
		})
	}
}

// runAttackCase runs c once against a fresh provider. It fails t on a
// bound a busy machine cannot excuse, and returns the measured bounds it
// missed (RSS, the probe's p99, how soon the connections closed), each
// with what it measured.
func runAttackCase(t *testing.T, bin string, c attack.Case) (soft map[string]string) {
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
	soft = map[string]string{}
	if g := r.Growth(); g > 64<<20 {
		soft["rss"] = fmt.Sprintf("RSS grew by %d MiB, over 64 MiB", g>>20)
	}
	within := c.CloseWithin
	if within == 0 {
		within = 5 * time.Second
	}
	if r.Closed < r.Conns {
		t.Errorf("%d of %d attacking connections closed, the last after %v: want all within %v", r.Closed, r.Conns, r.CloseMax, within)
	} else if r.CloseMax > within {
		soft["close"] = fmt.Sprintf("all %d attacking connections closed, the last after %v: want within %v", r.Conns, r.CloseMax, within)
	}
	if r.Probe.OK() < 0.99 {
		t.Errorf("the probe's calls: %d of %d failed (%s), want at least 99%% answered", r.Probe.Failed, r.Probe.Calls, r.Probe.FirstErr)
	}
	if r.Probe.P99 > r.Idle.P99+50*time.Millisecond {
		soft["p99"] = fmt.Sprintf("the probe's p99 %v under attack, over its idle %v + 50 ms", r.Probe.P99, r.Idle.P99)
	}
	if (t.Failed() || len(soft) > 0) && os.Getenv("WEFTTEST_ATTACK_VERBOSE") != "" {
		t.Logf("provider output:\n%s", p.Output())
	}
	return soft
}
