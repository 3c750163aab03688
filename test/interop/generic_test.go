package interop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// A dubbo-go generic reference (`generic: true`) calling a weft provider:
// dubbo-go's generic filter sends each call as $invoke(method, types, args)
// with the arguments as a []hessian.Object (a typed list, as Java's
// Object[]) and generic=true. weft resolves it before any filter: a method
// guard ordered first sees the real method and arguments and blocks the
// generic call as it would the plain one; results come back in generic form
// with Java field names; a business error comes back as Dubbo's
// GenericException with the original class and message.
func TestDubboGoGenericConsumerToWeftProvider(t *testing.T) {
	addr, port := freeAddr(t)
	svc := &weftEcho{}
	var mu sync.Mutex
	var seen []string
	guard := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
		mu.Lock()
		seen = append(seen, inv.Method+view.Text(inv.Args))
		mu.Unlock()
		if inv.Method == "fail" && len(inv.Args) == 1 && inv.Args[0] == "deny" {
			return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "the guard refuses fail(deny)")
		}
		return next.Invoke(ctx, inv)
	})
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s, filter: "guard,default"}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc),
		weft.WithFilter("guard", nil, func() (extension.Filter, error) { return guard, nil }))

	c, err := dubbogo.NewClient("dubbo://"+addr, dubbogo.WithGeneric())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	lastSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}

	var echoed any
	if _, err := c.Invoke(ctx, "echo", []any{"hi"}, &echoed, nil); err != nil || echoed != "hi" {
		t.Fatalf("generic echo: %#v %v", echoed, err)
	}
	if got := lastSeen(); got != `echo["hi"]` {
		t.Errorf("the guard saw %s, want the real call echo[\"hi\"]", got)
	}

	var user any
	if _, err := c.Invoke(ctx, "getUser", []any{int64(7)}, &user, nil); err != nil {
		t.Fatalf("generic getUser: %v", err)
	}
	if got := lastSeen(); got != "getUser[7]" {
		t.Errorf("the guard saw %s, want getUser[7]", got)
	}
	m, ok := user.(map[any]any)
	if !ok || m["id"] != int64(7) || m["name"] != "user-7" || m["score"] != 10.5 || m["class"] != dubbogo.UserClass {
		t.Fatalf("generic getUser result, want a map with Java field names and class: %#v", user)
	}

	// $invoke called as such, with Object[] arguments as dubbo-go builds
	// them for a generic service.
	var direct any
	if _, err := c.Invoke(ctx, "$invoke", []any{"echo", []string{"java.lang.String"}, []hessian.Object{"raw"}}, &direct, nil); err != nil || direct != "raw" {
		t.Fatalf("$invoke echo: %#v %v", direct, err)
	}

	before := svc.fails.Load()
	_, err = c.Invoke(ctx, "fail", []any{"deny"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "the guard refuses fail(deny)") {
		t.Fatalf("generic fail(deny) passed the guard: %v", err)
	}
	if svc.fails.Load() != before {
		t.Fatal("the guarded method ran")
	}

	_, err = c.Invoke(ctx, "fail", []any{"boom"}, nil, nil)
	var ge *java_exception.DubboGenericException
	if !errors.As(err, &ge) || ge.ExceptionClass != "java.lang.Throwable" || ge.ExceptionMessage != "fail: boom" {
		t.Fatalf("generic business error: want GenericException(java.lang.Throwable, \"fail: boom\"), got %T %v", err, err)
	}
}
