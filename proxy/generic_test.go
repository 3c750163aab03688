package proxy_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
)

// $invoke's arguments go as Java's GenericService sends them: the method, a
// String[] ("[string" list) and an Object[] ("[object" list), which is what
// dubbo-go's provider requires (it panicked on an untyped list).
func TestGenericInvocationSendsJavaArrays(t *testing.T) {
	inv := proxy.GenericInvocation("echo", []string{"java.lang.String"}, []any{"x"})
	if inv.Method != "$invoke" || inv.ParamTypes != "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;" || inv.AttachmentString("generic") != "true" {
		t.Fatalf("invocation %s %s generic=%q", inv.Method, inv.ParamTypes, inv.AttachmentString("generic"))
	}
	if _, ok := inv.Args[2].([]hessian2.Object); !ok {
		t.Fatalf("arguments are %T, want []hessian2.Object", inv.Args[2])
	}
	body, err := hessian2.New().Marshal(nil, inv.Args...)
	if err != nil {
		t.Fatal(err)
	}
	// "echo", then 'V' "[string" 1 "java.lang.String", then 'V' "[object" 1 "x".
	want := []byte("\x04echo" + "V\x07[string\x91\x10java.lang.String" + "V\x07[object\x91\x01x")
	if !bytes.Equal(body, want) {
		t.Fatalf("body\n got %q\nwant %q", body, want)
	}

	// No arguments: still two (empty) typed lists, never null.
	empty := proxy.GenericInvocation("ping", nil, nil)
	body, err = hessian2.New().Marshal(nil, empty.Args...)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("\x04ping" + "V\x07[string\x90" + "V\x07[object\x90"); !bytes.Equal(body, want) {
		t.Fatalf("no-argument body\n got %q\nwant %q", body, want)
	}
}

type genericUser struct {
	ID    int64    `hessian:"id"`
	Tags  []string `hessian:"tags"`
	Marks []int32
	Raw   []byte
	None  []string
	Kids  []*genericUser
}

func (genericUser) JavaClassName() string { return "org.example.User" }

// ToGeneric returns lists as Java's PojoUtils.generalize returns a List:
// untyped ([]any, an ArrayList to Java), whatever their Go element type;
// []byte stays binary and a nil list stays null.
func TestToGenericListsAreUntyped(t *testing.T) {
	shared := []string{"s"}
	u := &genericUser{ID: 1, Tags: []string{"a", "b"}, Marks: []int32{7}, Raw: []byte{1},
		Kids: []*genericUser{{ID: 2, Tags: shared}, {ID: 3, Tags: shared}}}
	g, ok := proxy.ToGeneric(u).(map[string]any)
	if !ok {
		t.Fatalf("ToGeneric = %T", proxy.ToGeneric(u))
	}
	if !reflect.DeepEqual(g["tags"], []any{"a", "b"}) || !reflect.DeepEqual(g["marks"], []any{int32(7)}) {
		t.Fatalf("tags %#v marks %#v, want []any", g["tags"], g["marks"])
	}
	if !reflect.DeepEqual(g["raw"], []byte{1}) || g["none"] != nil || g["class"] != "org.example.User" {
		t.Fatalf("raw %#v none %#v class %v", g["raw"], g["none"], g["class"])
	}
	kids := g["kids"].([]any)
	t2, t3 := kids[0].(map[string]any)["tags"].([]any), kids[1].(map[string]any)["tags"].([]any)
	if &t2[0] != &t3[0] {
		t.Fatal("a list shared by two POJOs became two lists")
	}
	if top := proxy.ToGeneric([]string{"x"}); !reflect.DeepEqual(top, []any{"x"}) {
		t.Fatalf("top-level []string: %#v", top)
	}
	body, err := hessian2.New().Marshal(nil, g["tags"])
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("\x58\x92\x01a\x01b"); !bytes.Equal(body, want) {
		t.Fatalf("tags on the wire %q, want the untyped list %q", body, want)
	}

	// A cycle stays a cycle, walked once.
	loop := []any{nil, []int64{1}}
	loop[0] = loop
	out := proxy.ToGeneric(loop).([]any)
	if inner, ok := out[0].([]any); !ok || &inner[0] != &out[0] || !reflect.DeepEqual(out[1], []any{int64(1)}) {
		t.Fatalf("cycle: %T %#v", out[0], out[1])
	}
}
