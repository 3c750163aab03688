package hessian2

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

func TestIdentity(t *testing.T) {
	s := New()
	if s.ID() != 2 || ID != 2 || Name != "hessian2" {
		t.Fatalf("ID %d, Name %q", s.ID(), Name)
	}
}

// TestMarshalMultiKeyMaps: with several keys the library's order is random
// (the oracle module checks that Marshal's, sorted, decodes as the library's
// does); Marshal's is the same every time, and round-trips.
func TestMarshalMultiKeyMaps(t *testing.T) {
	g := h2test.NewGen(2, true)
	for i := range 1000 {
		vs := g.Values()
		got := marshal(t, vs...)
		if !bytes.Equal(got, marshal(t, vs...)) {
			t.Fatalf("iteration %d: Marshal is not deterministic", i)
		}
		if _, _, err := decodeAll(got); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
	}
}

func TestMarshalAppends(t *testing.T) {
	dst := []byte("head")
	got, err := New().Marshal(dst, "a", int64(1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("head"), marshal(t, "a", int64(1))...)) {
		t.Fatalf("got % x", got)
	}
	// Objects too (both are golden cases: the bytes are the library's).
	p := side.Throwable("x")
	got, err = New().Marshal([]byte("head"), "a", p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("head"), marshal(t, "a", p)...)) {
		t.Fatalf("got % x", got)
	}
}

type named string

func TestMarshalErrors(t *testing.T) {
	// The library writes nothing for a named string type, which would shift
	// the rest of the body; Marshal reports it.
	dst := []byte("x")
	out, err := New().Marshal(dst, "a", named("b"))
	if err == nil || !strings.Contains(err.Error(), "named") {
		t.Fatalf("err %v", err)
	}
	if string(out) != "x" {
		t.Fatalf("dst changed: %q", out)
	}
	if _, err := New().Marshal(nil, make(chan int)); err == nil {
		t.Fatal("chan encoded")
	}
	// The library panics on a pointer to a slice; Marshal reports it.
	s := []string{"a"}
	if _, err := New().Marshal(nil, &s); err == nil || !strings.Contains(err.Error(), "pointer to []string") {
		t.Fatalf("err %v", err)
	}
}

func TestMarshalZeroAllocs(t *testing.T) {
	body := benchBody()
	buf := make([]byte, 0, 4096)
	s := New()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Marshal(buf[:0], body...); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
