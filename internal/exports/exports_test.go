package exports

import (
	"slices"
	"testing"
)

func TestTable(t *testing.T) {
	var tb Table[*int]
	a, b := new(int), new(int)
	if _, ok := tb.Lookup("x"); ok || tb.Len() != 0 {
		t.Fatal("empty table found something")
	}
	if !tb.Add("b/s:1", b) || !tb.Add("a/s:1", a) || tb.Add("a/s:1", b) {
		t.Fatal("Add: a new key is added, a key exported already is refused")
	}
	if e, ok := tb.Lookup("a/s:1"); !ok || e != a {
		t.Fatal("Lookup")
	}
	if got := tb.Keys(); !slices.Equal(got, []string{"a/s:1", "b/s:1"}) {
		t.Fatalf("Keys %v, want sorted", got)
	}
	if left := tb.Remove(a); left != 1 {
		t.Fatalf("Remove left %d", left)
	}
	if _, ok := tb.Lookup("a/s:1"); ok {
		t.Fatal("removed exporter still found")
	}
	n := 0
	tb.Each(func(string, *int) { n++ })
	if n != 1 || tb.Remove(b) != 0 {
		t.Fatal("Each / last Remove")
	}
}
