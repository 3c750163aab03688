package wasmfilter_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// A WASM service (ABI v1.2) answers through Serve: a string without JSON,
// JSON, a business error with its Java class; and each way a guest can fail
// a call (a trap, a loop, an answer that is not JSON, an unknown action)
// fails that call only, with an error that says what happened, and the
// next call is served.
func TestServeAndGuestFailures(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "service")
	f, err := wasmfilter.New(context.Background(), wasmfilter.Config{Name: "svc", Service: true, Path: path, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	serve := func(ctx context.Context, method string, args ...any) (kernel.Result, error) {
		return f.Serve(ctx, kernel.NewInvocation(method, args...), nil, args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dl, _ := ctx.Deadline()
	res, err := serve(ctx, "echo", "héllo")
	if err != nil || res.Value != "héllo" {
		t.Fatalf("echo: %#v, %v", res.Value, err)
	}
	if got := res.Attachments["deadline"]; got != strconv.FormatInt(dl.UnixMilli(), 10) {
		t.Fatalf("get_deadline: the guest saw %v, want %d", got, dl.UnixMilli())
	}
	res, err = serve(ctx, "json")
	if e, ok := res.Value.(kernel.Encoded); err != nil || !ok || e.Encoding() != "json" || string(e.Bytes()) != `{"n":1}` {
		t.Fatalf("json: %#v, %v", res.Value, err)
	}
	_, err = serve(ctx, "notjson")
	if kernel.CodeOf(err) != kernel.CodeSerialization || !strings.Contains(err.Error(), "set_result status 2") {
		t.Fatalf("notjson: %v, want the guest's rejection after set_result answered BAD_ARGUMENT (2)", err)
	}
	_, err = serve(ctx, "biz")
	var ke *kernel.Error
	if !kernel.IsBiz(err) || !errors.As(err, &ke) || ke.Class != "java.lang.IllegalStateException" || ke.Msg != "no" {
		t.Fatalf("biz: %v, want a business error of class java.lang.IllegalStateException", err)
	}
	for _, c := range []struct {
		method string
		code   kernel.Code
		says   string
	}{
		{"trap", kernel.CodeUnknown, "unreachable"},
		{"loop", kernel.CodeTimeout, ""},
		{"action9", kernel.CodeUnknown, "returned 9"},
	} {
		began := time.Now()
		cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := serve(cctx, c.method)
		ccancel()
		if kernel.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v (code %v), want code %v saying %q", c.method, err, kernel.CodeOf(err), c.code, c.says)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Fatalf("%s took %v: a guest must not hold a call past its deadline", c.method, d)
		}
		if res, err := serve(ctx, "echo", "again"); err != nil || res.Value != "again" {
			t.Fatalf("after %s: %#v, %v", c.method, res.Value, err)
		}
	}
	if st := f.Stats(); st.Traps < 1 || st.Timeouts < 1 {
		t.Fatalf("stats %+v: want the trap and the timeout counted", st)
	}
}
