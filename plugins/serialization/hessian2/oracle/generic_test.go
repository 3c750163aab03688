package oracle

import (
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"

	"github.com/weftrpc/weft/proxy"
)

// TestGenericInvocationIsDubboGos: the arguments of weft's $invoke are
// written byte for byte as dubbo-go's generic client writes its own (the
// method, a []string, a []hessian.Object: Java's String and "[string",
// "[object" lists), POJO maps and all, so dubbo-go's provider, which takes
// the arguments as []hessian.Object only, reads them.
func TestGenericInvocationIsDubboGos(t *testing.T) {
	// One key: the library writes a map's keys in Go's random order.
	pojo := map[string]any{"class": "org.weft.bench.User"}
	for _, c := range []struct {
		method string
		types  []string
		args   []any
	}{
		{"echo", []string{"java.lang.String"}, []any{"x"}},
		{"put", []string{"org.weft.bench.User", "java.util.List", "long"}, []any{pojo, []any{"p"}, int64(5)}},
		{"ping", nil, nil},
	} {
		inv := proxy.GenericInvocation(c.method, c.types, c.args)
		objects := make([]hessian.Object, len(c.args))
		for i, a := range c.args {
			objects[i] = a
		}
		types := c.types
		if types == nil {
			types = []string{}
		}
		mustEqualBytes(t, c.method, weftEncode(t, inv.Args...), libEncode(t, c.method, types, objects))
	}
}
