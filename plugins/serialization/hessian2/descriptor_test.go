package hessian2

import (
	"strings"
	"testing"
	"time"
)

type param struct{}

func (param) JavaClassName() string { return "org.weft.test.Impl" }
func (param) JavaParamName() string { return "org.weft.test.Iface" }

type ptrPOJO struct{ A string }

func (*ptrPOJO) JavaClassName() string { return "org.weft.test.Ptr" }

type plain struct{ A int }

type myInt int32

func TestDescriptor(t *testing.T) {
	i32, i64, f64, s, b := int32(1), int64(1), 1.0, "s", true
	cases := []struct {
		arg  any
		want string
	}{
		{"a", "Ljava/lang/String;"},
		{int64(1), "J"}, {1, "J"}, {uint64(1), "J"}, {uint32(1), "J"},
		{int32(1), "I"}, {int16(1), "S"}, {int8(1), "B"}, {uint8(1), "B"}, {uint16(1), "C"},
		{true, "Z"}, {1.5, "D"}, {float32(1), "F"},
		{nil, "Ljava/lang/Object;"},
		{time.Now(), "Ljava/util/Date;"}, {&time.Time{}, "Ljava/util/Date;"},
		{[]byte{1}, "[B"}, {[]string{"a"}, "[Ljava/lang/String;"},
		{[]int32{1}, "[I"}, {[]int64{1}, "[J"}, {[]int{1}, "[J"}, {[]float64{1}, "[D"},
		{[]float32{1}, "[F"}, {[]bool{true}, "[Z"}, {[]int16{1}, "[S"}, {[]uint16{1}, "[C"},
		{[]Object{1}, "[Ljava/lang/Object;"}, {[]time.Time{}, "[Ljava/util/Date;"},
		{[]any{1}, "Ljava/util/List;"}, {[][]string{}, "Ljava/util/List;"}, {[]*user{}, "Ljava/util/List;"},
		{map[string]any{}, "Ljava/util/Map;"}, {map[any]any{}, "Ljava/util/Map;"}, {map[int32]string{}, "Ljava/util/Map;"},
		{&user{}, "Lorg/weft/test/User;"}, {user{}, "Lorg/weft/test/User;"},
		{ptrPOJO{}, "Lorg/weft/test/Ptr;"}, {&ptrPOJO{}, "Lorg/weft/test/Ptr;"},
		{param{}, "Lorg/weft/test/Iface;"},
		{side.Throwable("x"), "Ljava/lang/Throwable;"}, {NewGenericException("a", "b"), "Lcom/alibaba/dubbo/rpc/service/GenericException;"},
		{color(1), "Lorg/weft/test/Color;"},
		{plain{}, "Ljava/lang/Object;"}, {&plain{}, "Ljava/lang/Object;"},
		{&i32, "Ljava/lang/Integer;"}, {&i64, "Ljava/lang/Long;"}, {&f64, "Ljava/lang/Double;"},
		{&s, "Ljava/lang/String;"}, {&b, "Ljava/lang/Boolean;"},
		{myInt(1), "I"}, {named("x"), "Ljava/lang/String;"},
	}
	var all []any
	var want strings.Builder
	for _, c := range cases {
		if got := Descriptor([]any{c.arg}); got != c.want {
			t.Errorf("%T: %q, want %q", c.arg, got, c.want)
		}
		all = append(all, c.arg)
		want.WriteString(c.want)
	}
	if got := Descriptor(all); got != want.String() {
		t.Errorf("all: %q", got)
	}
	if n, err := CountArgs(Descriptor(all)); err != nil || n != len(all) {
		t.Errorf("CountArgs(Descriptor(all)) = %d, %v; want %d", n, err, len(all))
	}
	if Descriptor(nil) != "" {
		t.Error("no args")
	}
}

func TestJavaTypeDescriptor(t *testing.T) {
	for in, want := range map[string]string{
		"int": "I", "boolean": "Z", "java.lang.String": "Ljava/lang/String;",
		"[Ljava.lang.String;": "[Ljava/lang/String;", "[I": "[I", "": "Ljava/lang/Object;",
	} {
		if got := TypeDescriptor(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestCountArgs(t *testing.T) {
	good := map[string]int{
		"": 0, "J": 1, "Ljava/lang/String;J": 2, "ZBCSIJFD": 8, "[I": 1, "[[[Ljava/lang/String;": 1,
		"Ljava/util/Map;[B[[JV": 4, "La;": 1, "L$_x/y1;I": 2, "L中文/类;": 1,
		strings.Repeat("[", 255) + "I": 1,
	}
	for desc, want := range good {
		if n, err := CountArgs(desc); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", desc, n, err, want)
		}
	}
	bad := []string{
		"L", "Ljava/lang/String", "L;", "[", "[[", "[V", "Q", "j", "Ljava.lang.String;",
		"L/a;", "La/;", "La//b;", "La[b;", "I ", " I", strings.Repeat("[", 256) + "I", "I\x00",
		"Ljava/lang/String;;",
	}
	for _, desc := range bad {
		if n, err := CountArgs(desc); err == nil {
			t.Errorf("%q accepted as %d args", desc, n)
		}
	}
}
