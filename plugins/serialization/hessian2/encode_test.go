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

// TestMarshalMultiKeyMaps: with several keys the library writes a map in
// Go's random order, so Marshal's bytes differ from call to call; every
// one of them decodes to the same values.
func TestMarshalMultiKeyMaps(t *testing.T) {
	g := h2test.NewGen(2, true)
	for i := range 1000 {
		vs := g.Values()
		a, b := marshal(t, vs...), marshal(t, vs...)
		va, _, errA := decodeAll(a)
		vb, _, errB := decodeAll(b)
		if errA != nil || errB != nil {
			t.Fatalf("iteration %d: %v, %v", i, errA, errB)
		}
		if da, db := h2test.DumpValues(va, nil), h2test.DumpValues(vb, nil); da != db {
			t.Fatalf("iteration %d: two encodings decode differently:\n%s\n%s", i, da, db)
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

// TestMarshalZeroAllocs: a body of strings and scalars (a request's header
// and arguments of those types) is written without the library, and
// without allocating.
func TestMarshalZeroAllocs(t *testing.T) {
	body := []any{"2.0.2", "org.weft.bench.EchoService", "", "echo", "Ljava/lang/String;",
		strings.Repeat("0123456789abcdef", 64), int64(7), int32(-3), true, nil, 1.5}
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
