package hessian2

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hostileCases are inputs that must fail with an error that names the
// problem: without a panic, without allocating what they declare, quickly.
func hostileCases(t testing.TB) []struct {
	name, data, want string
} {
	obj := string(marshal(t, &user{Name: "n"})) // forces the library path
	huge := "\x7f\xff\xff\xff"
	deepList := strings.Repeat("\x79", 200000)
	deepMap := strings.Repeat("H\x90", 200000)
	classChain := strings.Repeat("C\x00\x90", 100000)
	var quadratic strings.Builder
	quadratic.WriteString("H")
	for range 40000 {
		quadratic.WriteString("\x90\x78")
	}
	quadratic.WriteString("Z")
	return []struct{ name, data, want string }{
		{"untyped list of 2^31-1", "\x58I" + huge, "list of 2147483647 elements"},
		{"typed list of 2^31-1", "V\x07[string" + "I" + huge, "list of 2147483647 elements"},
		{"negative list length", "\x58I\xff\xff\xff\xff", "negative length"},
		{"library: untyped list of 2^31-1", obj + "\x58I" + huge, "list of 2147483647 elements"},
		{"library: typed list of 2^31-1", obj + "V\x07[string" + "I" + huge, "list of 2147483647 elements"},
		{"library: negative list length", obj + "V\x04[intI\xff\xff\xff\xff", "negative length"},
		{"binary chunk past the end", "B\xff\xff\x01\x02", "binary chunk of 65535 bytes"},
		{"binary chunk chain past the end", "A\x00\x01\x01B\x00\x09\x01", "binary chunk of 9 bytes"},
		{"library: binary past the end", obj + "B\xff\xff\x01", "binary chunk of 65535 bytes"},
		{"string past the end", "S\xff\xff" + "abc", "string chunk of 65535 characters"},
		{"short string past the end", "\x33\xff" + "abc", "string chunk of 1023 characters"},
		{"multibyte string past the end", "\x02\xe4\xb8\xad\xe4", "data ends inside a string"},
		{"library: string past the end", obj + "S\xff\xffabc", "string chunk of 65535 characters"},
		{"library: class of 2^31-1 fields", "C\x01XI" + huge, "class definition of 2147483647 elements"},
		{"library: class of negative fields", "C\x01XI\xff\xff\xff\xff", "negative length"},
		{"library: object of undefined class", obj + "\x6f", "undefined class"},
		{"library: class definition chain", classChain, "nesting deeper than 1000"},
		{"deep list", deepList, "nesting deeper than 1000"},
		{"deep map", deepMap, "nesting deeper than 1000"},
		{"library: deep list", obj + deepList, "nesting deeper than 1000"},
		{"high surrogate as last character", "\x01\xed\xa0\x80\xed\xb0\x80", "surrogate pair"},
		{"library: high surrogate as last character", obj + "\x01\xed\xa0\x80\xed\xb0\x80", "surrogate pair"},
		{"unterminated map", "H\x01k\x01v", "data ends inside a map"},
		{"library: unterminated map", obj + "H\x01k\x01v", "data ends inside a map"},
		{"unterminated list", "\x57\x01a", "data ends inside a list"},
		{"unhashable key", "H\x79\x01a\x01bZ", "map key of type []interface {}"},
		{"unhashable key after an object", obj + "H\x79\x01a\x01bZ", "map key of type []interface {}"},
		{"null key in typed map", "M\x11java.util.HashMapN\x01vZ", "null key"},
		{"invalid tag", "\x40", "invalid tag 0x40"},
		{"end marker in a list", "\x79Z", "unexpected end marker"},
		{"bad lead byte", "\x01\xff", "bad UTF-8 lead byte"},
		{"type reference out of range", "\x71\x95\x01x", "type reference 5"},
	}
}

func decodeUntilError(data []byte) error {
	d := NewDecoder(data)
	for {
		if _, err := d.Decode(); err != nil {
			return err
		}
	}
}

func TestHostileInput(t *testing.T) {
	for _, c := range hostileCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			err := decodeUntilError([]byte(c.data))
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || err == io.EOF || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
				t.Fatalf("allocated %d MiB", n>>20)
			}
			if elapsed > 5*time.Second {
				t.Fatalf("took %v", elapsed)
			}
		})
	}
}

// TestQuadraticReferences: the shape that the library's reference
// bookkeeping is quadratic on (many lists, then a map: after every key and
// value it decodes, the library revisits every list decoded so far) is
// refused by check before the library starts, quickly; a small one decodes.
func TestQuadraticReferences(t *testing.T) {
	body := func(lists int) []byte {
		var b strings.Builder
		b.WriteString("H")
		for range lists {
			b.WriteString("\x90\x78")
		}
		b.WriteString("Z")
		return []byte("C\x0bcom.Example\x90\x60" + b.String())
	}
	start := time.Now()
	d := NewDecoder(body(200000))
	d.SetBudgetFactor(1024) // this test is about time, not memory
	if _, err := d.Decode(); err == nil || !strings.Contains(err.Error(), "list references") {
		t.Fatalf("err %v, want the library's reference patching refused", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	d = NewDecoder(body(1000))
	d.SetBudgetFactor(64)
	for {
		if _, err := d.Decode(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
}
