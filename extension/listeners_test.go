package extension_test

import (
	"slices"
	"testing"

	"github.com/weftrpc/weft/extension"
)

func TestListeners(t *testing.T) {
	var ls extension.Listeners[*[]string, string]
	var a, b []string
	tell := func(l *[]string, v string) { *l = append(*l, v) }
	ls.Add(&a, tell) // nothing delivered yet: a hears nothing now
	if !ls.Deliver("v1", nil, tell) {
		t.Fatal("Deliver without a predicate did not deliver")
	}
	ls.Add(&b, tell) // b starts from v1
	same := func(v string) func(string, bool) bool {
		return func(last string, had bool) bool { return !had || last != v }
	}
	if ls.Deliver("v1", same("v1"), tell) {
		t.Fatal("an unchanged value was delivered")
	}
	ls.Deliver("v2", same("v2"), tell)
	if !slices.Equal(a, []string{"v1", "v2"}) || !slices.Equal(b, []string{"v1", "v2"}) {
		t.Fatalf("a heard %v, b heard %v; want v1, v2 each", a, b)
	}
	if got := ls.Record("v3", same("v3")); len(got) != 2 || got[0] != &a || got[1] != &b {
		t.Fatalf("Record returned %v, want a and b in order", got)
	}
	if got := ls.Record("v3", same("v3")); got != nil {
		t.Fatalf("Record of an unchanged value returned %v", got)
	}
	if last, had := ls.Last(); last != "v3" || !had {
		t.Fatalf("Last = %q %v", last, had)
	}
	if n := ls.Remove(&a); n != 1 {
		t.Fatalf("Remove left %d, want 1", n)
	}
	ls.Clear()
	if ls.Len() != 0 {
		t.Fatal("Clear left listeners")
	}
}
