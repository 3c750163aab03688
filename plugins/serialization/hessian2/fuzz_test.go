package hessian2

import (
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel/view"
)

// FuzzDecode: no input makes decoding panic or run away, whatever decodes
// is walked (kernel/view's bounded walker, as logs and errors walk values)
// and can be marshalled again. Seeds are in testdata/fuzz/FuzzDecode. (The
// oracle module's FuzzDecode also decodes with dubbo-go-hessian2 and
// compares.)
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s ./plugins/serialization/hessian2/
func FuzzDecode(f *testing.F) {
	f.Add(marshal(f, benchBody()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(data)
		var vals []any
		for range 10000 {
			v, err := d.Decode()
			if err != nil {
				break
			}
			_ = view.Text(v)
			vals = append(vals, v)
		}
		if d.err != nil && len(d.err.Error()) > 1000 {
			// Errors are bounded: they never echo decoded data whole.
			t.Fatalf("error of %d bytes", len(d.err.Error()))
		}
		_, _ = New().Marshal(nil, vals...)
	})
}

// FuzzCountArgs: CountArgs never panics, and what it accepts it counts
// consistently.
func FuzzCountArgs(f *testing.F) {
	for _, s := range []string{"", "Ljava/lang/String;J", "[[I", "L;", "[", "Ljava/util/Map;[B[[JV", "La/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		n, err := CountArgs(desc)
		if err != nil {
			return
		}
		if n > len(desc) || n > MaxArgs {
			t.Fatalf("%q: %d args", desc, n)
		}
		n2, err := CountArgs(desc + desc)
		if 2*n > MaxArgs {
			if err == nil || !strings.Contains(err.Error(), "more than 255 parameters") {
				t.Fatalf("%q twice (%d parameters): %d, %v; want the cap", desc, 2*n, n2, err)
			}
			return
		}
		if err != nil || n2 != 2*n {
			t.Fatalf("%q twice: %d, %v; want %d", desc, n2, err, 2*n)
		}
	})
}
