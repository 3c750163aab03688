package oracle

import (
	"fmt"
	"io"
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"

	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

// color is an enum for both: the library's POJOEnum (EnumValue returns its
// JavaEnum), which weft's registry takes as it is.
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
	// Each side has its own registry: a program that runs both registers
	// its types with both, as here.
	hessian.RegisterPOJO(&h2test.User{})
	hessian.RegisterJavaEnum(color(0))
	hessian2.RegisterPOJO(&h2test.User{})
	hessian2.RegisterPOJO(color(0))
}

// side is the library's Go types for the golden cases.
var side = h2test.Side{
	Color:     func(i int) any { return color(i) },
	Throwable: func(msg string) any { return java_exception.NewThrowable(msg) },
}

// libEncode is the reference: one library Encoder, values in sequence.
func libEncode(t testing.TB, values ...any) []byte {
	t.Helper()
	e := hessian.NewEncoder()
	for i, v := range values {
		if err := e.Encode(v); err != nil {
			t.Fatalf("library cannot encode value %d (%T): %v", i, v, err)
		}
	}
	return append([]byte(nil), e.Buffer()...)
}

// libDecodeAll decodes every value with the library, reporting a panic as an
// error.
func libDecodeAll(data []byte) (vals []any, err error) {
	d := hessian.NewDecoder(data)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("library panic: %v", r)
		}
	}()
	for {
		v, err := d.Decode()
		if err == io.EOF {
			return vals, nil
		}
		if err != nil {
			return vals, err
		}
		vals = append(vals, v)
	}
}

// weftEncode and weftDecodeAll use weft through its public API, as a
// program does.
func weftEncode(t testing.TB, values ...any) []byte {
	t.Helper()
	b, err := hessian2.New().Marshal(nil, values...)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

func weftDecodeAll(data []byte) ([]any, error) {
	d := hessian2.New().NewDecoder(data)
	var vals []any
	for {
		v, err := d.Decode()
		if err == io.EOF {
			return vals, nil
		}
		if err != nil {
			return vals, err
		}
		vals = append(vals, v)
	}
}

func window(b []byte, i int) []byte {
	return b[max(0, i-16):min(len(b), i+32)]
}

func mustEqualBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: bytes differ at %d (len %d vs library %d)\nweft:    % x\nlibrary: % x",
			what, i, len(got), len(want), window(got, i), window(want, i))
	}
}

func cut(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
