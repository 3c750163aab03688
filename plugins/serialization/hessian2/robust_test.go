package hessian2

import (
	"bytes"
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
		{"type reference out of range", "\x71\x95\x01x", "type reference 5 out of range"},
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
// bookkeeping takes hours over (many lists in a map), after an object,
// decodes in linear time.
func TestQuadraticReferences(t *testing.T) {
	var b strings.Builder
	b.WriteString("H")
	for range 40000 {
		b.WriteString("\x90\x78")
	}
	b.WriteString("Z")
	data := []byte("C\x0bcom.Example\x90\x60" + b.String())
	start := time.Now()
	// Each empty list is held by the back-reference table: 40 bytes of
	// Go memory for two wire bytes, past the default budget; this test is
	// about time.
	d := NewDecoder(data)
	d.SetBudgetFactor(64)
	if err := decodeUntilError(data); err == nil || !strings.Contains(err.Error(), "decoding needs more than") {
		t.Fatalf("default budget: %v, want it refused", err)
	}
	for {
		if _, err := d.Decode(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

// TestQuadraticFastPath: the shape that the library takes hours over is
// fast-path data, decoded in linear time.
func TestQuadraticFastPath(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("H")
	for range 200000 {
		b.WriteString("\x90\x78")
	}
	b.WriteString("Z")
	start := time.Now()
	d := NewDecoder(b.Bytes())
	d.SetBudgetFactor(64) // as in TestQuadraticReferences
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if m := v.(map[any]any); len(m) != 1 {
		t.Fatalf("%d entries", len(m))
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}
