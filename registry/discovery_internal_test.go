package registry

import "testing"

// The metadata cache keeps only the revisions some instance still serves:
// every provider change makes a new revision, and a long-lived consumer
// must not keep them all.
func TestForgetDropsRevisionsNoInstanceServes(t *testing.T) {
	r := &instanceRegistry{cache: map[string]*MetadataInfo{
		"a\x00r1": {}, "a\x00r2": {}, "b\x00r1": {},
	}}
	r.forget("a", []string{"r2"})
	if _, ok := r.cache["a\x00r1"]; ok {
		t.Error("a's revision r1, served by no instance, stayed cached")
	}
	if _, ok := r.cache["a\x00r2"]; !ok {
		t.Error("a's live revision r2 was dropped")
	}
	if _, ok := r.cache["b\x00r1"]; !ok {
		t.Error("another application's revision was dropped")
	}
}
