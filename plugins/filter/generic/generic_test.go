package generic_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/generic"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
)

type user struct {
	ID   int64    `hessian:"id"`
	Name string   `hessian:"name"`
	Tags []string `hessian:"tags"`
}

func (user) JavaClassName() string { return "org.weft.bench.User" }

type users struct{}

func (users) EchoUser(_ context.Context, u *user) (*user, error) {
	u.Name += "!"
	return u, nil
}

func (users) Echo(s string) string { return s }

func serve(t *testing.T) kernel.Invoker {
	t.Helper()
	iv, err := proxy.NewServiceInvoker(kernel.MustParseURL("dubbo://127.0.0.1:1/org.weft.bench.EchoService"), users{})
	if err != nil {
		t.Fatal(err)
	}
	return generic.Wrap(iv)
}

// $invoke's arguments come in every form consumers send: Java's and weft's
// Object[] (a "[object" list, decoded as []hessian2.Object) with String[]
// types, and dubbo-go's or an older weft's untyped lists.
func TestInvokeArgumentForms(t *testing.T) {
	iv := serve(t)
	for name, inv := range map[string]*kernel.Invocation{
		"Object[] and String[]": kernel.NewInvocation("$invoke", "echo", []string{"java.lang.String"}, []hessian2.Object{"x"}),
		"untyped lists":         kernel.NewInvocation("$invoke", "echo", []any{"java.lang.String"}, []any{"x"}),
		"GenericInvocation":     proxy.GenericInvocation("echo", []string{"java.lang.String"}, []any{"x"}),
	} {
		res, err := iv.Invoke(context.Background(), inv)
		if err != nil || res.Value != "x" {
			t.Errorf("%s: %#v %v", name, res.Value, err)
		}
	}
}

// A POJO passed as a map with "class" is realized into the method's type,
// and the POJO result comes back as Java's GenericFilter returns it: a map
// with "class", whose List field is an untyped list (an ArrayList to a Java
// caller), not the typed "[string" list that Java reads as String[].
func TestPOJOArgumentAndResultLists(t *testing.T) {
	iv := serve(t)
	arg := map[any]any{"class": "org.weft.bench.User", "id": int64(5), "name": "ann", "tags": []any{"p", "q"}}
	res, err := iv.Invoke(context.Background(), proxy.GenericInvocation("echoUser", []string{"org.weft.bench.User"}, []any{arg}))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := res.Value.(map[string]any)
	if !ok {
		t.Fatalf("result %T, want a map", res.Value)
	}
	want := map[string]any{"class": "org.weft.bench.User", "id": int64(5), "name": "ann!", "tags": []any{"p", "q"}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("result\n got %#v\nwant %#v", m, want)
	}
	body, err := hessian2.New().Marshal(nil, m["tags"])
	if err != nil {
		t.Fatal(err)
	}
	if body[0] != 0x58 {
		t.Fatalf("tags go as %q, want an untyped list (0x58)", body)
	}
}
