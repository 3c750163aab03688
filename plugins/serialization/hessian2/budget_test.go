package hessian2

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"
)

func fixedList(tag string, n int, elem string) []byte {
	var b bytes.Buffer
	b.WriteString(tag)
	b.WriteByte('I')
	binary.Write(&b, binary.BigEndian, int32(n))
	b.WriteString(strings.Repeat(elem, n))
	return b.Bytes()
}

// One wire byte must not become 16 bytes of Go memory without limit: an
// 8 MiB frame of nulls decoded into 134 MiB before the budget.
func TestDecodeBudgetRefusesAmplification(t *testing.T) {
	const n = 4 << 20
	var varList bytes.Buffer
	varList.WriteByte(tagUListVar)
	varList.WriteString(strings.Repeat("N", n))
	varList.WriteByte('Z')
	var emptyMap bytes.Buffer
	emptyMap.WriteByte('H')
	for i := range n / 8 {
		emptyMap.Write([]byte{'I', byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		emptyMap.Write([]byte{'N'})
	}
	emptyMap.WriteByte('Z')
	for name, data := range map[string][]byte{
		"fixed list of nulls":    fixedList("\x58", n, "N"),
		"variable list of nulls": varList.Bytes(),
		"list of empty strings":  fixedList("\x58", n, "\x00"),
		"typed string list":      append(append([]byte{'V', 0x07}, "[string"...), fixedList("", n, "\x00")...),
		"typed long list":        append(append([]byte{'V', 0x05}, "[long"...), fixedList("", n, "\xe0")...),
		"map of distinct keys":   emptyMap.Bytes(),
		"library: list of nulls": append([]byte(string(marshal(t, &user{Name: "n"}))), fixedList("\x58", n, "N")...),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := decodeUntilError(data)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "memory budget") {
			t.Errorf("%s: err %v", name, err)
			continue
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(BudgetFor(len(data)))+uint64(len(data)) {
			t.Errorf("%s: allocated %d MiB for a %d MiB body", name, grew>>20, len(data)>>20)
		}
	}
}

// What real callers send fits: typed arrays of short strings and numbers
// within the default budget; lists of small maps, which the library
// decodes into some 23 times their size, with a larger factor (the
// protocol's decode.factor).
func TestDecodeBudgetAcceptsRealData(t *testing.T) {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = "user-" + strings.Repeat("x", i%7)
	}
	nums := make([]int64, 200_000)
	for i := range nums {
		nums[i] = int64(i) * 1_000_003
	}
	rows := make([]any, 20_000)
	for i := range rows {
		rows[i] = map[string]any{"id": int64(i), "name": "row name", "ok": true}
	}
	for name, v := range map[string]any{"String[] of ids": ids, "long[]": nums, "list of maps": rows} {
		data, err := New().Marshal(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder(data)
		if name == "list of maps" {
			if _, err := NewDecoder(data).Decode(); err == nil {
				t.Errorf("%s: decoded within the default budget", name)
			}
			d.SetBudgetFactor(24) // the library holds some 23 bytes a wire byte of them
		}
		if _, err := d.Decode(); err != nil {
			t.Errorf("%s (%d bytes): %v", name, len(data), err)
		}
	}
}

// The validator's own records are not charged to the budget (it mirrors the
// library's allocations, and its records are freed before the library
// runs), so they must stay a small share of it on the bodies that make the
// most records per wire byte: each one-byte list, two-byte map and
// five-byte class definition is a record. Before issue 22's last fixes, a
// body of class definitions made the validator allocate 253 MiB (2.6 × its
// budget), and one of empty lists 156 MiB.
func TestValidatorOwnMemory(t *testing.T) {
	const size = 8 << 20
	fill := func(head, elem []byte) []byte {
		b := append([]byte{tagUListVar}, head...)
		for len(b)+len(elem)+1 <= size {
			b = append(b, elem...)
		}
		return append(b, 'Z')
	}
	distinct := []byte{tagUListVar}
	for i := 0; len(distinct)+9 <= size; i++ {
		distinct = append(distinct, 'C', 0x04, byte('a'+i%26), byte('a'+i/26%26), byte('a'+i/676%26), byte('a'+i/17576%26), 0x90, 'N')
	}
	distinct = append(distinct, 'Z')
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"empty maps", fill(nil, []byte{'H', 'Z'})},
		{"empty lists", fill(nil, []byte{0x78})},
		{"lists of one empty list", fill(nil, []byte{0x79, 0x78})},
		{"unused class definitions", fill(nil, []byte{'C', 0x01, 'x', 0x90, 'N'})},
		{"class definitions of distinct names", distinct},
		{"objects of an unregistered class", fill([]byte{'C', 0x01, 'x', 0x90}, []byte{0x60})},
		{"typed lists", fill(nil, []byte{0x70, 0x01, 'x'})},
	} {
		budget := BudgetFor(len(c.body))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := check(c.body, budget)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "memory budget") {
			t.Errorf("%s: err %v, want the memory budget's", c.name, err)
			continue
		}
		grew := int64(after.TotalAlloc - before.TotalAlloc)
		t.Logf("%-36s the validator allocated %5.1f MiB for a budget of %d MiB", c.name, float64(grew)/(1<<20), budget>>20)
		if grew > budget/4 {
			t.Errorf("%s: the validator allocated %d MiB, over a quarter of the %d MiB budget", c.name, grew>>20, budget>>20)
		}
	}
}

// Large bodies are checked no more at once than the pool allows: a body
// over checkAlone waits for a turn, a small one does not.
func TestPoolChecksInTurn(t *testing.T) {
	p := NewPool(1 << 30)
	for range cap(p.checks) {
		p.checks <- struct{}{}
	}
	// A list of two-byte ints: the validator reads it (no fast path does).
	big := fixedList("\x58", checkAlone/2+1, "\xc8\x05")
	small := marshal(t, "small")
	decode := func(b []byte) chan error {
		done := make(chan error, 1)
		go func() {
			d := NewDecoder(b)
			d.SetPool(p)
			_, err := d.Decode()
			d.Release()
			done <- err
		}()
		return done
	}
	if err := <-decode(small); err != nil {
		t.Fatalf("a small body: %v", err)
	}
	waiting := decode(big)
	select {
	case err := <-waiting:
		t.Fatalf("a large body was checked while every turn was taken (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	<-p.checks
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("a large body: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a large body still waits after a turn was freed")
	}
}
