package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
)

// vault has a method a guard protects.
type vault struct{ secrets atomic.Int64 }

func (v *vault) Secret(_ context.Context, who string) (string, error) {
	v.secrets.Add(1)
	return "the secret, for " + who, nil
}

func (v *vault) Echo(_ context.Context, s string) (string, error) { return s, nil }

// Refuse fails with a Go error, or with a Java-classed business error (in
// the interface's package, so the exception filter passes it as it is).
func (v *vault) Refuse(_ context.Context, classed bool) error {
	if classed {
		return &kernel.Error{Code: kernel.CodeBiz, Class: "org.weft.VaultLockedException", Msg: "vault locked"}
	}
	return errors.New("no entry")
}

// Generic calls are resolved before any filter runs (issue 11): a guard
// listed first, before the default filters, sees the real method of a call
// made through $invoke and blocks it as it blocks a typed call. Before, it
// saw "$invoke" and let every generic caller through. $invoke's arguments
// are also accepted as Java's GenericService sends them: Object[] as a typed
// list "[object" ([]hessian2.Object once decoded).
func TestGenericCallsMeetFiltersAsTheRealCall(t *testing.T) {
	noLeaks(t)
	svc := &vault{}
	var seen atomic.Value
	guard := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
		seen.Store(inv.Method)
		if inv.Method == "secret" {
			return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "nobody may call %s", inv.Method)
		}
		return next.Invoke(ctx, inv)
	})
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault, filter: "guard,default"}
`, addr[strings.LastIndexByte(addr, ':')+1:]),
		weft.WithService("vault", svc),
		weft.WithFilter("guard", nil, func() (extension.Filter, error) { return guard, nil }))
	app := startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "dubbo://%s", retries: 0}
`, addr))
	gc := proxy.NewGenericClient(func() (kernel.Invoker, error) { return app.Reference("vault") })
	ctx := context.Background()

	_, err := gc.GenericInvoke(ctx, "secret", []string{"java.lang.String"}, []any{"mallory"})
	if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "nobody may call secret") {
		t.Fatalf("generic call of the guarded method: %v (the guard saw %v)", err, seen.Load())
	}
	if n := svc.secrets.Load(); n != 0 {
		t.Fatalf("the guarded method ran %d times", n)
	}
	got, err := gc.GenericInvoke(ctx, "echo", []string{"java.lang.String"}, []any{"hi"})
	if err != nil || got != "hi" || seen.Load() != "echo" {
		t.Fatalf("generic echo: %v %v (the guard saw %v)", got, err, seen.Load())
	}

	// Java's form: Object[] arguments and String[] types as typed lists.
	iv, err := app.Reference("vault")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("$invoke", "echo", []string{"java.lang.String"}, []hessian2.Object{"from java"})
	inv.ParamTypes = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;"
	inv.SetAttachment("generic", "true")
	res, err := iv.Invoke(ctx, inv)
	if err != nil || res.Value != "from java" {
		t.Fatalf("$invoke with Object[] arguments: %v %v", res.Value, err)
	}
}

// A generic call's business error goes back as Dubbo's GenericException
// (com.alibaba.dubbo.rpc.service.GenericException, with exceptionClass and
// exceptionMessage), which a Java GenericService caller catches; a weft
// consumer reads the original class and message from it. A typed call's
// error is unchanged.
func TestGenericCallErrorsAreGenericExceptions(t *testing.T) {
	noLeaks(t)
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault}
`, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("vault", &vault{}))
	app := startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "dubbo://%s", retries: 0}
`, addr))
	gc := proxy.NewGenericClient(func() (kernel.Invoker, error) { return app.Reference("vault") })
	for _, tc := range []struct {
		classed          bool
		class, msg, text string
	}{
		{true, "org.weft.VaultLockedException", "vault locked", "org.weft.VaultLockedException: vault locked"},
		{false, "java.lang.Throwable", "no entry", "java.lang.Throwable: no entry"},
	} {
		_, err := gc.GenericInvoke(context.Background(), "refuse", []string{"boolean"}, []any{tc.classed})
		var ge *hessian2.GenericException
		if !kernel.IsBiz(err) || !errors.As(err, &ge) {
			t.Fatalf("classed=%v: %v (%T), want a GenericException", tc.classed, err, err)
		}
		if ge.ExceptionClass != tc.class || ge.ExceptionMessage != tc.msg || err.Error() != tc.text {
			t.Fatalf("classed=%v: exceptionClass %q, exceptionMessage %q, error %q", tc.classed, ge.ExceptionClass, ge.ExceptionMessage, err)
		}
	}
	// The typed call: the error as it is.
	_, err := gc.Invoke(context.Background(), "refuse", true)
	var ge *hessian2.GenericException
	if !kernel.IsBiz(err) || errors.As(err, &ge) || err.Error() != "org.weft.VaultLockedException: vault locked" {
		t.Fatalf("typed call: %v", err)
	}
}
