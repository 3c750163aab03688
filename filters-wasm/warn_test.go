package wasmfilter_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// records is a slog.Handler that keeps the warnings it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Level >= slog.LevelWarn {
		r.recs = append(r.recs, rec.Clone())
	}
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// count returns the warnings whose error attribute contains kind, and the
// sum of their suppressed attributes.
func (r *records) count(kind string) (lines int, suppressed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		match := false
		var n int64
		rec.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "error":
				match = match || strings.Contains(a.Value.String(), kind)
			case "suppressed":
				n = a.Value.Int64()
			}
			return true
		})
		if match {
			lines++
			suppressed += n
		}
	}
	return lines, suppressed
}

// Trap and timeout warnings are rate-limited per filter and per kind: a
// burst of failures logs one line of each kind per interval, and the next
// line after the interval says how many were suppressed, so that no failure
// goes uncounted (lines + suppressed = failures).
func TestWarningsRateLimited(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "misbehave")
	ep := newEndpoint()
	fail := func(t *testing.T, f *wasmfilter.Filter, mode string, code kernel.Code) {
		t.Helper()
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
		if _, err := f.Invoke(context.Background(), ep, withMode(mode)); kernel.CodeOf(err) != code {
			t.Fatalf("%s: %v", mode, err)
		}
	}

	t.Run("one line per kind per interval", func(t *testing.T) {
		recs := &records{}
		f := newFilter(t, path, wasmfilter.Config{Name: "wasm-w", Timeout: 20 * time.Millisecond,
			WarnInterval: time.Hour, Log: slog.New(recs)})
		for range 5 {
			fail(t, f, "trap", kernel.CodeUnknown)
			fail(t, f, "loop", kernel.CodeTimeout)
		}
		if n, _ := recs.count("trapped"); n != 1 {
			t.Errorf("5 traps logged %d lines, want 1", n)
		}
		if n, _ := recs.count("ran past the filter's timeout"); n != 1 {
			t.Errorf("5 timeouts logged %d lines, want 1", n)
		}
		// Another filter of the same App has limits of its own.
		g := newFilter(t, path, wasmfilter.Config{Name: "wasm-w2", WarnInterval: time.Hour, Log: slog.New(recs)})
		fail(t, g, "trap", kernel.CodeUnknown)
		if n, _ := recs.count("trapped"); n != 2 {
			t.Errorf("a second filter's trap: %d lines, want 2", n)
		}
	})

	t.Run("suppressed counted in the next line", func(t *testing.T) {
		recs := &records{}
		const interval = time.Second
		f := newFilter(t, path, wasmfilter.Config{Name: "wasm-w", WarnInterval: interval, Log: slog.New(recs)})
		const burst = 5
		for range burst {
			fail(t, f, "trap", kernel.CodeUnknown)
		}
		time.Sleep(interval + 50*time.Millisecond)
		fail(t, f, "trap", kernel.CodeUnknown) // logged, with the count of the burst's suppressed lines
		lines, suppressed := recs.count("trapped")
		t.Logf("%d traps: %d lines, %d suppressed", burst+1, lines, suppressed)
		if lines+int(suppressed) != burst+1 || suppressed == 0 {
			t.Errorf("%d traps: %d lines + %d suppressed", burst+1, lines, suppressed)
		}
	})
}
