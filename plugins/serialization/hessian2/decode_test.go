package hessian2

import (
	"errors"
	"io"
	"testing"
)

func TestDecodeEOFAndStickyErrors(t *testing.T) {
	d := NewDecoder(nil)
	for range 2 {
		if _, err := d.Decode(); err != io.EOF {
			t.Fatalf("empty: %v", err)
		}
	}
	d = NewDecoder(cat("a", 0x05, 'b'))
	if v, err := d.Decode(); v != "a" || err != nil {
		t.Fatalf("%v %v", v, err)
	}
	_, err1 := d.Decode()
	_, err2 := d.Decode()
	if err1 == nil || err1 != err2 || errors.Is(err1, io.EOF) {
		t.Fatalf("errors %v, %v", err1, err2)
	}
}

func TestSerializationDecoder(t *testing.T) {
	s := New()
	data, err := s.Marshal(nil, benchBody()...)
	if err != nil {
		t.Fatal(err)
	}
	dec := s.NewDecoder(data)
	for i, want := range benchBody() {
		v, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := want.(map[string]any); ok {
			mm := map[any]any{}
			for k, v := range m {
				mm[k] = v
			}
			want = mm
		}
		if d := diff(v, want); d != "" {
			t.Fatalf("value %d: %s", i, d)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestDecodeDoesNotAlias: decoded strings and binaries survive the input
// buffer's reuse.
func TestDecodeDoesNotAlias(t *testing.T) {
	data := marshal(t, "hello", []byte{1, 2, 3}, []string{"x"}, map[string]any{"k": "v"})
	vals, _, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 0
	}
	want := []any{"hello", []byte{1, 2, 3}, []string{"x"}, map[any]any{"k": "v"}}
	if d := diff(vals, want); d != "" {
		t.Fatal(d)
	}
}

// TestDecodeAllocs: a typical request body (strings, then a map of strings
// for the attachments) decodes on the fast paths: the strings, the map and
// its storage, the decoder; the library (a 4 KiB reader, its state, a
// boxed value per entry) never starts.
func TestDecodeAllocs(t *testing.T) {
	data := marshal(t, benchBody()...)
	allocs := testing.AllocsPerRun(100, func() {
		d := NewDecoder(data)
		for range 6 {
			if _, err := d.DecodeString(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.DecodeStringMap(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 12 {
		t.Fatalf("%v allocations", allocs)
	}
	t.Logf("%v allocations", allocs)
}
