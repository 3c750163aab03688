package hessian2

import (
	"encoding/binary"
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
