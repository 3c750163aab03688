package wasmfilter

import (
	"fmt"
	"testing"
)

// Shared data is bounded per vm_id, in keys and in bytes: a guest flooding
// it gets INTERNAL_FAILURE, and other vm_ids are not affected; tokens
// change on every set and a stale one is refused.
func TestSharedDataBoundsAndTokens(t *testing.T) {
	s := NewSharedData()
	for i := range maxSharedKeys {
		if st := s.set("flood", []byte(fmt.Sprint(i)), []byte("v"), 0); st != pwOK {
			t.Fatalf("key %d: status %d", i, st)
		}
	}
	if st := s.set("flood", []byte("one-more"), []byte("v"), 0); st != pwInternalFailure {
		t.Errorf("key %d+1: status %d, want INTERNAL_FAILURE", maxSharedKeys, st)
	}
	if st := s.set("flood", []byte("0"), []byte("w"), 0); st != pwOK {
		t.Errorf("rewriting a stored key at the key bound: status %d, want OK", st)
	}
	if st := s.set("big", []byte("k"), make([]byte, maxSharedBytes), 0); st != pwInternalFailure {
		t.Errorf("a value over the byte bound: status %d, want INTERNAL_FAILURE", st)
	}
	if st := s.set("other", []byte("k"), []byte("v1"), 0); st != pwOK {
		t.Errorf("another vm_id after a flood: status %d, want OK", st)
	}
	_, cas1, _ := s.get("other", []byte("k"))
	if st := s.set("other", []byte("k"), []byte("v2"), cas1); st != pwOK {
		t.Errorf("set with the current token: status %d", st)
	}
	if st := s.set("other", []byte("k"), []byte("v3"), cas1); st != pwCasMismatch {
		t.Errorf("set with a stale token: status %d, want CAS_MISMATCH", st)
	}
	if v, cas2, _ := s.get("other", []byte("k")); string(v) != "v2" || cas2 == cas1 || cas2 == 0 {
		t.Errorf("after the refused set: %q token %d (was %d)", v, cas2, cas1)
	}
}
