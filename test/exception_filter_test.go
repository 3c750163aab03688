package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// ledger raises every kind of error a Go provider can raise.
type ledger struct{}

func (ledger) Raise(kind string) (string, error) {
	switch kind {
	case "plain":
		return "", errors.New("account locked")
	case "jdk":
		// An exception value of a JDK class (any Throwable: this
		// package's UnknownException of the class, a registered POJO,
		// dubbo-go's java_exception types).
		return "", &hessian2.UnknownException{Class: "java.lang.IllegalArgumentException", DetailMessage: "amount must be positive"}
	case "api":
		return "", &kernel.Error{Code: kernel.CodeBiz, Class: "org.weft.ledger.api.InsufficientFunds", Msg: "balance 3, wanted 5"}
	case "dubbo":
		return "", &kernel.Error{Code: kernel.CodeBiz, Class: "org.apache.dubbo.rpc.RpcException", Msg: "from below"}
	case "foreign":
		return "", &kernel.Error{Code: kernel.CodeBiz, Class: "com.internal.db.DeadlockException", Msg: "row 7 locked by tx 9"}
	case "panic":
		var m map[string]int
		m["boom"]++ // a nil map write: a fault, not an answer
	}
	return "ok", nil
}

type ledgerClient struct {
	Raise func(ctx context.Context, kind string) (string, error)
}

// Dubbo's ExceptionFilter rules over TCP, as a consumer sees them: what a
// consumer can decode (no class, the JDK's, Dubbo's, the interface's own
// package) arrives as raised; an exception of a class the consumer may not
// have arrives as java.lang.RuntimeException carrying "class: message"; a
// panic arrives as java.lang.RuntimeException, and the provider logs it at
// error level with its stack and the caller's address, once per interval.
// With `filter: -exception` the foreign class goes through as it is.
func TestExceptionFilterOverTCP(t *testing.T) {
	noLeaks(t)
	logs := &syncBuffer{}
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    ledger: {interface: org.weft.ledger.api.Ledger}
    raw: {interface: org.weft.ledger.api.Raw, ref: ledger, filter: "-exception"}
`, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("ledger", ledger{}),
		weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	var c, raw ledgerClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    ledger: {interface: org.weft.ledger.api.Ledger, url: "dubbo://%s", retries: 0}
    raw: {interface: org.weft.ledger.api.Raw, url: "dubbo://%s", retries: 0}
`, addr, addr), weft.WithReference("ledger", &c), weft.WithReference("raw", &raw))
	ctx := context.Background()

	for _, tc := range []struct{ kind, class, msg string }{
		{"plain", "java.lang.Throwable", "account locked"},
		{"jdk", "java.lang.IllegalArgumentException", "amount must be positive"},
		{"api", "org.weft.ledger.api.InsufficientFunds", "balance 3, wanted 5"},
		{"dubbo", "org.apache.dubbo.rpc.RpcException", "from below"},
		{"foreign", "java.lang.RuntimeException", "com.internal.db.DeadlockException: row 7 locked by tx 9"},
		{"panic", "java.lang.RuntimeException", "panic in org.weft.ledger.api.Ledger.raise: assignment to entry in nil map"},
	} {
		_, err := c.Raise(ctx, tc.kind)
		var ke *kernel.Error
		if !errors.As(err, &ke) || ke.Code != kernel.CodeBiz {
			t.Fatalf("%s: want a business error, got %v", tc.kind, err)
		}
		if ke.Class != tc.class || ke.Msg != tc.msg {
			t.Errorf("%s: the consumer got class %q message %q; want %q %q", tc.kind, ke.Class, ke.Msg, tc.class, tc.msg)
		}
	}

	_, err := raw.Raise(ctx, "foreign")
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Class != "com.internal.db.DeadlockException" {
		t.Errorf("with -exception the class should pass as it is: %v", err)
	}

	// The log: one line for the panic with its stack and the caller, one
	// for the foreign class; none for what passed.
	out := logs.String()
	if n := strings.Count(out, "panicked"); n != 1 {
		t.Errorf("want one panic line, got %d:\n%s", n, out)
	}
	for _, want := range []string{"level=ERROR", "remote=127.0.0.1:", "exception_filter_test.go", "com.internal.db.DeadlockException: row 7 locked"} {
		if !strings.Contains(out, want) {
			t.Errorf("the provider's log lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"account locked", "amount must be positive", "InsufficientFunds"} {
		if strings.Contains(out, not) {
			t.Errorf("the log reports an error that passed (%q):\n%s", not, out)
		}
	}

	// The same fault again within the interval: the consumer still gets
	// it, the log does not grow.
	before := strings.Count(logs.String(), "\n")
	for range 20 {
		if _, err := c.Raise(ctx, "panic"); !kernel.IsBiz(err) {
			t.Fatalf("repeated panic: %v", err)
		}
	}
	if after := strings.Count(logs.String(), "\n"); after != before {
		t.Errorf("20 more panics within the interval wrote %d more log lines; want 0", after-before)
	}
}
