package hessian2

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
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
