package hessian2

import (
	hessian "github.com/apache/dubbo-go-hessian2"

	"bytes"
	"io"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

// The tests of this package do not use dubbo-go-hessian2: what it writes and
// decodes is in testdata/golden.txt (see golden_test.go), and the tests that
// run it side by side with this package are in the oracle module.

var (
	diff = h2test.Diff
	str  = h2test.Str
	cat  = h2test.Cat
)

// user is a registered POJO (the oracle registers it with the library too).
type user = h2test.User

// color is an enum: the library's POJOEnum.
type color int32

func (c color) JavaClassName() string { return "org.weft.test.Color" }
func (c color) String() string        { return [...]string{"RED", "GREEN"}[c] }
func (color) EnumValue(s string) hessian.JavaEnum {
	if s == "GREEN" {
		return 1
	}
	return 0
}

func init() {
	RegisterPOJO(&user{})
	RegisterPOJO(color(0))
}

// side is this package's Go types for the golden cases.
var side = h2test.Side{
	Color:     func(i int) any { return color(i) },
	Throwable: func(msg string) any { return classedException(throwableClass, msg) },
}

// decodeAll decodes every value with this package.
func decodeAll(data []byte) ([]any, *Decoder, error) {
	d := NewDecoder(data)
	var vals []any
	for {
		v, err := d.Decode()
		if err == io.EOF {
			return vals, d, nil
		}
		if err != nil {
			return vals, d, err
		}
		vals = append(vals, v)
	}
}

func marshal(t testing.TB, values ...any) []byte {
	t.Helper()
	b, err := New().Marshal(nil, values...)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

func mustEqualBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: bytes differ at %d (len %d vs %d)\ngot:  % x\nwant: % x",
			what, i, len(got), len(want), window(got, i), window(want, i))
	}
}

func window(b []byte, i int) []byte {
	return b[max(0, i-16):min(len(b), i+32)]
}
