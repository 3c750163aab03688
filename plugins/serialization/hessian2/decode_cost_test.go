package hessian2

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
)

// skipUnderRace skips a test that weighs allocations: under -race they are
// the race runtime's too. test.sh runs these without -race, so CI runs
// them.
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures under -race are not a program's; test.sh runs this without -race")
	}
}

// intKeyMap is an 'H' map of n distinct int keys (outside 0-255, so each is
// boxed) to null: six wire bytes an entry.
func intKeyMap(n int) []byte {
	b := []byte{'H'}
	for i := range n {
		b = append(b, 'I')
		b = binary.BigEndian.AppendUint32(b, uint32(1000+i))
		b = append(b, 'N')
	}
	return append(b, 'Z')
}

// varList is a variable-length untyped list of n copies of elem.
func varList(n int, elem string) []byte {
	return []byte("\x57" + strings.Repeat(elem, n) + "Z")
}

// The budget charges what decoding really allocates, maps above all (a
// Go map's header, its group, and each table it grows into, which the
// growth leaves behind as garbage until the next GC): the heap's growth
// while decoding (runtime.MemStats.TotalAlloc, garbage included) and what
// the decoded value holds after a GC (HeapAlloc) are both within the
// budget charged. Before, an empty map was charged nothing and a map entry
// a guess, and 16 frames of such maps held 3.1× their size in RSS
// (TestHostileFramesMemoryBounded in test/).
func TestDecodeBudgetChargesRealCost(t *testing.T) {
	skipUnderRace(t)
	// A class without a registered type decodes into a map[string]any
	// made at its size: 20 fields, then 4,000 objects of it.
	var obj strings.Builder
	obj.WriteString("\x58I\x00\x00\x0f\xa0C\x0bcom.Example\xa4")
	for i := range 20 {
		obj.WriteString(string(rune(0x02)) + "f" + string(rune('a'+i)))
	}
	for range 4000 {
		obj.WriteString("\x60" + strings.Repeat("\x91", 20))
	}
	rows := make([]any, 20_000)
	for i := range rows {
		rows[i] = map[string]any{"id": int64(i), "name": "row name", "ok": true}
	}
	rowData, err := New().Marshal(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		// Right after a growth (897 entries: the tables just doubled)
		// and right before one, small to large.
		{"map of 897 int keys", intKeyMap(897)},
		{"map of 1,792 int keys", intKeyMap(1792)},
		{"map of 1,793 int keys", intKeyMap(1793)},
		{"map of 14,337 int keys", intKeyMap(14337)},
		{"map of 200,000 int keys", intKeyMap(200_000)},
		{"list of 500,000 empty maps", varList(500_000, "HZ")},
		{"list of 200,000 one-entry maps", varList(200_000, "H\x90NZ")},
		{"list of 50,000 nine-entry maps", varList(50_000, "H\x90N\x91N\x92N\x93N\x94N\x95N\x96N\x97N\x98NZ")},
		{"list of 300,000 empty lists", varList(300_000, "\x78")},
		{"20,000 rows of 3-entry maps", rowData},
		{"4,000 objects of an unregistered 20-field class", []byte(obj.String())},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := NewDecoder(c.data)
		d.SetBudgetFactor(1000)
		v, err := d.Decode()
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		total := int64(after.TotalAlloc - before.TotalAlloc)
		runtime.GC()
		runtime.ReadMemStats(&after)
		live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		charged := BudgetFactorFor(len(c.data), 1000) - d.budget
		runtime.KeepAlive(v)
		runtime.KeepAlive(d)
		n := float64(len(c.data))
		t.Logf("%-48s %8d wire bytes: charged %6.2f×, allocated %6.2f× (%6.2f× held after GC)",
			c.name, len(c.data), float64(charged)/n, float64(total)/n, float64(live)/n)
		// 4 KiB for the runtime's own allocations meanwhile; 10% for a
		// big map's tables, which split one by one as their share of the
		// keys reaches 7/8, not all at the count the budget assumes.
		if slack := int64(4<<10) + charged/10; total > charged+slack {
			t.Errorf("%s: decoding allocated %d bytes, %.2f× the %d charged", c.name, total, float64(total)/float64(charged), charged)
		}
		// 5% for what a value holds past the charges (a string's bytes
		// rounded to a size class, say).
		if live > charged+charged/20 {
			t.Errorf("%s: the decoded value holds %d bytes, more than the %d charged", c.name, live, charged)
		}
		// Not so far over either, or real data needs a larger
		// decode.factor than it should.
		if charged > 2*total {
			t.Errorf("%s: charged %d bytes, over twice the %d allocated", c.name, charged, total)
		}
	}
}

// A map refused by the budget is refused before it makes the tables it
// was refused for: the growth is charged before the entry goes in.
func TestDecodeBudgetRefusesMapGrowthBeforeIt(t *testing.T) {
	skipUnderRace(t)
	data := intKeyMap(400_000) // 2.4 MB: a budget of ~5.8 MB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewDecoder(data).Decode()
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "decoding needs more than") {
		t.Fatalf("err %v, want the budget's", err)
	}
	budget := BudgetFor(len(data))
	if total := int64(after.TotalAlloc - before.TotalAlloc); total > budget {
		t.Errorf("allocated %d bytes before refusing, over the budget of %d", total, budget)
	}
}

func TestMapGrowthFollowsGo(t *testing.T) {
	// The entries at which a map made without a hint reallocates, from
	// Go's runtime/maps: the group at the first, a 16-slot table at the
	// ninth, then each table doubles past 7/8 of its slots.
	var at []int
	for n := range 1800 {
		if mapGrowth(n) > 0 {
			at = append(at, n+1)
		}
	}
	want := []int{1, 9, 15, 29, 57, 113, 225, 449, 897, 1569}
	if len(at) != len(want) {
		t.Fatalf("growth at entries %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("growth at entries %v, want %v", at, want)
		}
	}
	for _, c := range []struct{ hint, slots int }{{0, 0}, {8, 0}, {9, 16}, {14, 16}, {15, 32}, {896, 1024}, {897, 1024}, {915, 2048}, {5000, 8192}} {
		if got := mapSlotsFor(c.hint); got != c.slots {
			t.Errorf("mapSlotsFor(%d) = %d, want %d", c.hint, got, c.slots)
		}
	}
}
