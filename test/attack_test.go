package test

import (
	"context"
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
// within 50 ms of its own idle p99 measured just before.
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
			if g := r.Growth(); g > 64<<20 {
				t.Errorf("RSS grew by %d MiB, over 64 MiB", g>>20)
			}
			within := c.CloseWithin
			if within == 0 {
				within = 5 * time.Second
			}
			if r.Closed < r.Conns || r.CloseMax > within {
				t.Errorf("%d of %d attacking connections closed, the last after %v: want all within %v", r.Closed, r.Conns, r.CloseMax, within)
			}
			if r.Probe.OK() < 0.99 {
				t.Errorf("the probe's calls: %d of %d failed (%s), want at least 99%% answered", r.Probe.Failed, r.Probe.Calls, r.Probe.FirstErr)
			}
			if r.Probe.P99 > r.Idle.P99+50*time.Millisecond {
				t.Errorf("the probe's p99 %v under attack, over its idle %v + 50 ms", r.Probe.P99, r.Idle.P99)
			}
			if t.Failed() && os.Getenv("WEFTTEST_ATTACK_VERBOSE") != "" {
				t.Logf("provider output:\n%s", p.Output())
			}
		})
	}
}
