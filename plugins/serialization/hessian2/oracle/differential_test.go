package oracle

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

// TestMarshalMatchesLibrary: for the golden cases (with the library's own
// enum and exception types) and for random nested fast values (maps of at
// most one key, whose order cannot differ), weft writes the library's bytes.
func TestMarshalMatchesLibrary(t *testing.T) {
	for _, c := range h2test.MarshalCases(side) {
		mustEqualBytes(t, c.Name, weftEncode(t, c.Values...), libEncode(t, c.Values...))
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	g := h2test.NewGen(1, false)
	for i := range n {
		vs := g.Values()
		mustEqualBytes(t, fmt.Sprint("iteration ", i), weftEncode(t, vs...), libEncode(t, vs...))
	}
}

// TestMarshalMultiKeyMaps: with several keys the library's order is random;
// weft's (sorted) is as long and decodes, with the library, to the same
// values.
func TestMarshalMultiKeyMaps(t *testing.T) {
	g := h2test.NewGen(2, true)
	for i := range 1000 {
		vs := g.Values()
		got, want := weftEncode(t, vs...), libEncode(t, vs...)
		if len(got) != len(want) {
			t.Fatalf("iteration %d: %d bytes, library %d", i, len(got), len(want))
		}
		gv, gerr := libDecodeAll(got)
		wv, werr := libDecodeAll(want)
		if gerr != nil || werr != nil || !h2test.Equal(gv, wv) {
			t.Fatalf("iteration %d: errors %v, %v; decoded differ: %s", i, gerr, werr, h2test.Diff(gv, wv))
		}
	}
}

// assertSameDecode decodes data with both and compares by shape (h2test.Dump:
// weft's types and the library's have the same names and fields).
func assertSameDecode(t *testing.T, name string, data []byte) {
	t.Helper()
	want, werr := libDecodeAll(data)
	got, gerr := weftDecodeAll(data)
	gd, wd := h2test.DumpValues(got, gerr), h2test.DumpValues(want, werr)
	if d, ok := h2test.DecodeDiffers[name]; ok {
		if gd != d.Dump {
			t.Fatalf("%s: weft decoded %s, want %s (%s)", name, cut(gd), d.Dump, d.Why)
		}
		return
	}
	if gd != wd {
		t.Fatalf("%s: decode % x:\nweft:    %s (%v)\nlibrary: %s (%v)", name, window(data, 0), cut(gd), gerr, cut(wd), werr)
	}
}

// TestDecodeMatchesLibrary: every compact form, hand-made forms the library's
// encoder never writes, objects and enums, and random bodies decode the same
// with both.
func TestDecodeMatchesLibrary(t *testing.T) {
	for _, c := range h2test.DecodeCases(side) {
		data := c.Data
		if data == nil {
			data = libEncode(t, c.Values...)
		}
		assertSameDecode(t, c.Name, data)
	}
	n := 1000
	if testing.Short() {
		n = 100
	}
	g := h2test.NewGen(3, true)
	for i := range n {
		vs := g.Values()
		assertSameDecode(t, fmt.Sprint("random body ", i), libEncode(t, vs...))
		// And what weft writes decodes as what the library writes.
		got, err := weftDecodeAll(weftEncode(t, vs...))
		want, _ := libDecodeAll(libEncode(t, vs...))
		if d := h2test.Dump(got); err != nil || d != h2test.Dump(want) {
			t.Fatalf("random body %d: round trip %v: %s", i, err, cut(d))
		}
	}
}

// bizException is a Java exception class that both consumers registered.
type bizException struct {
	SerialVersionUID     int64
	DetailMessage        string
	SuppressedExceptions []java_exception.Throwabler
	StackTrace           []java_exception.StackTraceElement
	Cause                java_exception.Throwabler
}

func (bizException) JavaClassName() string                               { return "org.weft.test.BizException" }
func (e bizException) Error() string                                     { return e.DetailMessage }
func (e bizException) GetStackTrace() []java_exception.StackTraceElement { return e.StackTrace }

func init() {
	hessian.RegisterPOJO(&bizException{})
	hessian2.RegisterPOJO(&bizException{})
}

// TestExceptionsToTheLibrary: what a weft provider writes for an error, the
// library (a dubbo-go consumer) decodes into its own exception types: the
// registered class, its built-in java.lang exceptions, its Throwable for a
// plain error, an UnknownException for a class nobody registered; and weft
// passes dubbo-go's exception types through as they are.
func TestExceptionsToTheLibrary(t *testing.T) {
	for _, c := range []struct {
		err       error
		typ, msg  string
		javaClass string
	}{
		{&kernel.Error{Code: kernel.CodeBiz, Class: "org.weft.test.BizException", Msg: "bad state"}, "*oracle.bizException", "bad state", "org.weft.test.BizException"},
		{&kernel.Error{Code: kernel.CodeBiz, Class: "java.lang.IllegalStateException", Msg: "bad state"}, "*java_exception.IllegalStateException", "bad state", "java.lang.IllegalStateException"},
		{errors.New("boom"), "*java_exception.Throwable", "boom", "java.lang.Throwable"},
		{&kernel.Error{Code: kernel.CodeBiz, Class: "com.example.Nobody", Msg: "m"}, "*hessian.UnknownException", "m", ""},
		{java_exception.NewIllegalArgumentException("bad arg"), "*java_exception.IllegalArgumentException", "bad arg", "java.lang.IllegalArgumentException"},
	} {
		body := weftEncode(t, hessian.RESPONSE_WITH_EXCEPTION, hessian2.ExceptionValue(c.err))
		vals, err := libDecodeAll(body)
		if err != nil || len(vals) != 2 {
			t.Fatalf("%v: library: %v %v", c.err, vals, err)
		}
		th, ok := vals[1].(java_exception.Throwabler)
		if !ok || fmt.Sprintf("%T", vals[1]) != c.typ || th.Error() != c.msg && !strings.HasSuffix(th.Error(), c.msg) {
			t.Fatalf("%v: library decoded %T %#v", c.err, vals[1], vals[1])
		}
		if c.javaClass != "" && th.JavaClassName() != c.javaClass {
			t.Fatalf("%v: class %q", c.err, th.JavaClassName())
		}
		// And weft, as a consumer, reads the business error back.
		d := hessian2.NewDecoder(body)
		_, _ = d.Decode()
		v, err := d.Decode()
		if err != nil {
			t.Fatal(err)
		}
		var ke *kernel.Error
		if e := hessian2.ExceptionError(v); !errors.As(e, &ke) || ke.Msg != c.msg {
			t.Fatalf("%v: weft read %v", c.err, e)
		}
	}
}

// TestExceptionsFromTheLibrary: what dubbo-go writes for its exception types
// weft reads as business errors with the class and the message: into the
// library's own types (weft decodes with it), its generic exception by the
// wrapped class.
func TestExceptionsFromTheLibrary(t *testing.T) {
	generic := java_exception.NewDubboGenericException("com.foo.Orig", "orig message")
	generic.DetailMessage = "com.foo.Orig: orig message\n\tat ..."
	for _, c := range []struct {
		v          any
		class, msg string
		typ        string
	}{
		{java_exception.NewThrowable("t"), "java.lang.Throwable", "t", "*java_exception.Throwable"},
		{java_exception.NewNullPointerException("npe"), "java.lang.NullPointerException", "npe", "*java_exception.NullPointerException"},
		{generic, "com.foo.Orig", "orig message", "*java_exception.DubboGenericException"},
		{&bizException{DetailMessage: "biz"}, "org.weft.test.BizException", "biz", "*oracle.bizException"},
	} {
		vals, err := weftDecodeAll(libEncode(t, hessian.RESPONSE_WITH_EXCEPTION, c.v))
		if err != nil || len(vals) != 2 {
			t.Fatalf("%T: %v %v", c.v, vals, err)
		}
		if fmt.Sprintf("%T", vals[1]) != c.typ {
			t.Fatalf("%T decoded as %T", c.v, vals[1])
		}
		var ke *kernel.Error
		if e := hessian2.ExceptionError(vals[1]); !errors.As(e, &ke) || ke.Class != c.class || ke.Msg != c.msg {
			t.Fatalf("%T: %#v", c.v, e)
		}
		// The library's types, taken by weft as they are (they have
		// the shape of weft's Throwable).
		var ke2 *kernel.Error
		if e := hessian2.ExceptionError(c.v); !errors.As(e, &ke2) || ke2.Class != c.class || ke2.Msg != c.msg {
			t.Fatalf("%T as it is: %#v", c.v, e)
		}
	}
}

// TestTypesHaveTheLibrarysShape: weft's types that stand for the library's
// have the same exported fields, in the same order, with types of the same
// shape, so values and the objects they encode as are interchangeable.
func TestTypesHaveTheLibrarysShape(t *testing.T) {
	for _, c := range []struct{ weft, lib reflect.Type }{
		{reflect.TypeFor[hessian2.StackTraceElement](), reflect.TypeFor[java_exception.StackTraceElement]()},
		{reflect.TypeFor[hessian2.UnknownException](), reflect.TypeFor[hessian.UnknownException]()},
		{reflect.TypeFor[hessian2.UnknownException](), reflect.TypeFor[java_exception.Throwable]()},
		{reflect.TypeFor[hessian2.GenericException](), reflect.TypeFor[java_exception.DubboGenericException]()},
	} {
		if got, want := fields(c.weft), fields(c.lib); got != want {
			t.Errorf("%s: %s\n%s: %s", c.weft, got, c.lib, want)
		}
	}
	for _, c := range []struct{ weft, lib reflect.Type }{
		{reflect.TypeFor[hessian2.Object](), reflect.TypeFor[hessian.Object]()},
		{reflect.TypeFor[hessian2.POJO](), reflect.TypeFor[hessian.POJO]()},
		{reflect.TypeFor[hessian2.Param](), reflect.TypeFor[hessian.Param]()},
	} {
		if c.weft.Kind() != c.lib.Kind() || c.weft.NumMethod() != c.lib.NumMethod() || c.weft.Name() != c.lib.Name() {
			t.Errorf("%s vs %s", c.weft, c.lib)
		}
		for i := range c.weft.NumMethod() {
			if m, ok := c.lib.MethodByName(c.weft.Method(i).Name); !ok || m.Type.String() != c.weft.Method(i).Type.String() {
				t.Errorf("%s.%s", c.lib, c.weft.Method(i).Name)
			}
		}
	}
	// The library's interfaces are met by weft's types where code passes
	// them across.
	var _ java_exception.Throwabler = (*bizException)(nil)
	var _ hessian2.Throwable = java_exception.NewThrowable("")
	var _ hessian2.Throwable = (*hessian2.UnknownException)(nil)
}

// fields describes a struct's exported fields by shape: names, and types by
// their names without package.
func fields(t reflect.Type) string {
	var b strings.Builder
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("hessian") == "-" {
			continue
		}
		fmt.Fprintf(&b, "%s %s; ", f.Name, shape(f.Type))
	}
	return b.String()
}

// java_exception.Throwabler is weft's Throwable plus a method (GetStackTrace)
// that weft does not need.
func shape(t reflect.Type) string {
	return strings.ReplaceAll(h2test.TypeName(t), "Throwabler", "Throwable")
}

// TestDescriptorOfLibraryTypes: dubbo-go's types, passed as arguments, get
// the descriptors dubbo-go gives them.
func TestDescriptorOfLibraryTypes(t *testing.T) {
	for _, c := range []struct {
		arg  any
		want string
	}{
		{[]hessian.Object{1}, "[Ljava/lang/Object;"},
		{java_exception.NewThrowable("x"), "Ljava/lang/Throwable;"},
		{time.Time{}, "Ljava/util/Date;"},
	} {
		if got := hessian2.Descriptor([]any{c.arg}); got != c.want {
			t.Errorf("%T: %q, want %q", c.arg, got, c.want)
		}
	}
}

// FuzzDecode decodes with both; where both succeed, they agree by shape,
// except on values holding objects (exceptions and other classes decode
// into each side's own types, compared by the deterministic tests).
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s .
func FuzzDecode(f *testing.F) {
	f.Add(libEncode(f, "2.0.2", "org.weft.Echo", "", "echo", "Ljava/lang/String;", "hi", map[string]any{"path": "org.weft.Echo"}))
	f.Add(libEncode(f, &h2test.User{Name: "n"}, []any{int32(1)}, color(1)))
	f.Add(libEncode(f, hessian.RESPONSE_WITH_EXCEPTION, java_exception.NewThrowable("x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := weftDecodeAll(data)
		if gerr != nil {
			return // weft is the stricter of the two on malformed data
		}
		want, werr := libDecodeAll(data)
		if werr != nil || holdsObjects(reflect.ValueOf(want), 0) {
			return // where the library panics or errs, weft may decode (DecodeDiffers)
		}
		if gd, wd := h2test.DumpValues(got, nil), h2test.DumpValues(want, nil); gd != wd {
			t.Fatalf("% x:\nweft:    %s\nlibrary: %s", data, cut(gd), cut(wd))
		}
	})
}

// holdsObjects tells values that contain a struct other than time.Time.
func holdsObjects(v reflect.Value, depth int) bool {
	if !v.IsValid() || depth > 50 {
		return depth > 50
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		return !v.IsNil() && holdsObjects(v.Elem(), depth+1)
	case reflect.Struct:
		return v.Type() != reflect.TypeFor[time.Time]()
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if holdsObjects(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if holdsObjects(it.Key(), depth+1) || holdsObjects(it.Value(), depth+1) {
				return true
			}
		}
	}
	return false
}
