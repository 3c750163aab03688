package proxy_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

type ctxKey struct{}

var errEmptyName = errors.New("empty name")

type greeter struct{ failErr error }

func (g *greeter) SayHello(ctx context.Context, name string) (string, error) {
	switch name {
	case "":
		return "", errEmptyName
	case "panic":
		panic("boom")
	}
	if via, _ := ctx.Value(ctxKey{}).(string); via != "" {
		return "hello " + name + " via " + via, nil
	}
	return "hello " + name, nil
}

func (g *greeter) Add(a, b int32) int32 { return a + b }

func (g *greeter) Fail(ctx context.Context) error { return g.failErr }

func (g *greeter) Nothing() {}

var greeterURL = kernel.MustParseURL("dubbo://127.0.0.1:20880/org.example.Greeter?version=1.0")

func newGreeter(t *testing.T, failErr error) *proxy.ServiceInvoker {
	t.Helper()
	s, err := proxy.NewServiceInvoker(greeterURL, &greeter{failErr: failErr})
	if err != nil {
		t.Fatalf("NewServiceInvoker: %v", err)
	}
	return s
}

func TestServiceInvokerMethods(t *testing.T) {
	s := newGreeter(t, nil)
	if got, want := s.MethodNames(), []string{"add", "fail", "nothing", "sayHello"}; !slices.Equal(got, want) {
		t.Errorf("MethodNames() = %q, want %q", got, want)
	}
	names := s.MethodNames()
	names[0] = "mutated"
	if s.MethodNames()[0] != "add" {
		t.Error("MethodNames returns the internal slice")
	}
	if s.URL() != greeterURL || !s.IsAvailable() {
		t.Error("URL/IsAvailable")
	}
	other := kernel.MustParseURL("tri://127.0.0.1:50051/org.example.Greeter")
	w := s.WithURL(other)
	if w.URL() != other || s.URL() != greeterURL {
		t.Errorf("WithURL: copy has %v, original %v", w.URL(), s.URL())
	}
	res, err := w.Invoke(context.Background(), kernel.NewInvocation("sayHello", "x"))
	if err != nil || res.Value != "hello x" {
		t.Errorf("WithURL copy Invoke = %v, %v", res.Value, err)
	}
	s.Destroy() // no-op; still usable
	if _, err := s.Invoke(context.Background(), kernel.NewInvocation("nothing")); err != nil {
		t.Errorf("after Destroy: %v", err)
	}
}

func TestServiceInvokerInvoke(t *testing.T) {
	s := newGreeter(t, nil)
	tests := []struct {
		name   string
		ctx    context.Context
		method string
		args   []any
		want   any
	}{
		{"wire name", nil, "sayHello", []any{"world"}, "hello world"},
		{"Go name", nil, "SayHello", []any{"world"}, "hello world"},
		{"context reaches the method", context.WithValue(context.Background(), ctxKey{}, "ctx"), "sayHello", []any{"bob"}, "hello bob via ctx"},
		{"int32 args", nil, "add", []any{int32(2), int32(3)}, int32(5)},
		{"int64 args converted", nil, "add", []any{int64(2), int64(3)}, int32(5)},
		{"int args converted", nil, "Add", []any{40, 2}, int32(42)},
		{"mixed numeric kinds", nil, "add", []any{float64(7), uint8(1)}, int32(8)},
		{"no args, no results", nil, "nothing", nil, nil},
		{"error result nil", nil, "fail", nil, nil},
		{"Go name of ctx-only method", nil, "Fail", []any{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := s.Invoke(ctx, kernel.NewInvocation(tc.method, tc.args...))
			if err != nil {
				t.Fatalf("Invoke(%s, %v): %v", tc.method, tc.args, err)
			}
			if res.Value != tc.want {
				t.Errorf("Invoke(%s, %v) = %#v (%T), want %#v (%T)", tc.method, tc.args, res.Value, res.Value, tc.want, tc.want)
			}
		})
	}
}

func TestServiceInvokerErrors(t *testing.T) {
	errFail := errors.New("account locked")
	s := newGreeter(t, errFail)
	tests := []struct {
		name     string
		method   string
		args     []any
		code     kernel.Code
		contains []string
		is       error
	}{
		{"unknown method", "sayBye", []any{"x"}, kernel.CodeMethodNotFound,
			[]string{`"sayBye"`, "add, fail, nothing, sayHello", "org.example.Greeter:1.0"}, nil},
		{"wrong case", "sayhello", []any{"x"}, kernel.CodeMethodNotFound, []string{`"sayhello"`}, nil},
		{"empty method", "", nil, kernel.CodeMethodNotFound, []string{`""`}, nil},
		{"too few args", "sayHello", nil, kernel.CodeSerialization, []string{"sayHello", "1", "0"}, nil},
		{"too many args", "add", []any{1, 2, 3}, kernel.CodeSerialization, []string{"add", "2", "3"}, nil},
		{"args to nullary", "nothing", []any{1}, kernel.CodeSerialization, []string{"nothing"}, nil},
		{"string for int32", "add", []any{"1", 2}, kernel.CodeSerialization, []string{"argument 0", "int32", "string"}, nil},
		{"second argument wrong", "add", []any{1, true}, kernel.CodeSerialization, []string{"argument 1", "bool"}, nil},
		{"number for string", "sayHello", []any{42}, kernel.CodeSerialization, []string{"argument 0", "string", "int"}, nil},
		{"returned error", "fail", nil, kernel.CodeBiz, []string{"account locked"}, errFail},
		{"returned error with value", "sayHello", []any{""}, kernel.CodeBiz, []string{"empty name"}, errEmptyName},
		{"nil arg becomes zero value", "sayHello", []any{nil}, kernel.CodeBiz, []string{"empty name"}, errEmptyName},
		{"panic", "sayHello", []any{"panic"}, kernel.CodeBiz, []string{"panic", "boom", "sayHello"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Invoke(context.Background(), kernel.NewInvocation(tc.method, tc.args...))
			if err == nil {
				t.Fatalf("Invoke(%q, %v) = %v, want error", tc.method, tc.args, res.Value)
			}
			if res.Value != nil {
				t.Errorf("value %v returned with error", res.Value)
			}
			if got := kernel.CodeOf(err); got != tc.code {
				t.Errorf("CodeOf(%v) = %v, want %v", err, got, tc.code)
			}
			if got := kernel.IsBiz(err); got != (tc.code == kernel.CodeBiz) {
				t.Errorf("IsBiz(%v) = %v", err, got)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not contain %q", err, c)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
		})
	}
}

type wide struct{}

func (wide) Sum(ctx context.Context, a, b, c, d, e int) int { return a + b + c + d + e }
func (wide) Deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

type mixed struct{}

func (mixed) Good() int                        { return 1 }
func (mixed) Variadic(xs ...int) int           { return len(xs) }
func (mixed) Three() (int, int, error)         { return 0, 0, nil }
func (mixed) TwoNoErr() (int, int)             { return 0, 0 }
func (mixed) ErrFirst() (error, int)           { return nil, 0 }
func (mixed) CtxNotFirst(int, context.Context) {}

type noMethods struct{}

type ptrOnly struct{}

func (*ptrOnly) Hello() string { return "hi" }

func TestNewServiceInvokerShapes(t *testing.T) {
	t.Run("more args than the stack buffer, pointer args", func(t *testing.T) {
		s, err := proxy.NewServiceInvoker(greeterURL, wide{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Invoke(context.Background(), kernel.NewInvocation("sum", 1, 2, 3, 4, int64(5)))
		if err != nil || res.Value != 15 {
			t.Errorf("sum = %v, %v; want 15", res.Value, err)
		}
		str := "pointed"
		for _, arg := range []any{str, &str} {
			res, err = s.Invoke(context.Background(), kernel.NewInvocation("deref", arg))
			if err != nil || res.Value != "pointed" {
				t.Errorf("deref(%T) = %v, %v", arg, res.Value, err)
			}
		}
		res, err = s.Invoke(context.Background(), kernel.NewInvocation("deref", nil))
		if err != nil || res.Value != "<nil>" {
			t.Errorf("deref(nil) = %v, %v", res.Value, err)
		}
	})
	t.Run("unsupported shapes are skipped", func(t *testing.T) {
		s, err := proxy.NewServiceInvoker(greeterURL, mixed{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"ctxNotFirst", "good"} // ErrFirst: error not last
		if got := s.MethodNames(); !slices.Equal(got, want) {
			t.Errorf("MethodNames() = %q, want %q", got, want)
		}
		if _, err := s.Invoke(context.Background(), kernel.NewInvocation("variadic", 1)); kernel.CodeOf(err) != kernel.CodeMethodNotFound {
			t.Errorf("variadic: %v, want method not found", err)
		}
	})
	errorCases := []struct {
		name string
		impl any
	}{
		{"nil", nil},
		{"nil pointer", (*greeter)(nil)},
		{"no methods", noMethods{}},
		{"pointer-receiver methods on a value", ptrOnly{}},
		{"only unsupported methods", struct{ mixedOnlyBad }{}},
	}
	for _, tc := range errorCases {
		t.Run("error: "+tc.name, func(t *testing.T) {
			if s, err := proxy.NewServiceInvoker(greeterURL, tc.impl); err == nil {
				t.Errorf("NewServiceInvoker(%T) = %q, want error", tc.impl, s.MethodNames())
			} else if !strings.Contains(err.Error(), "org.example.Greeter:1.0") {
				t.Errorf("error %q does not name the service", err)
			}
		})
	}
}

type mixedOnlyBad struct{}

func (mixedOnlyBad) Variadic(xs ...int) int   { return len(xs) }
func (mixedOnlyBad) Three() (int, int, error) { return 0, 0, nil }

func TestWireName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SayHello", "sayHello"},
		{"sayHello", "sayHello"},
		{"A", "a"},
		{"a", "a"},
		{"", ""},
		{"URL", "uRL"},
		{"X1", "x1"},
		{"ÉCOLE", "éCOLE"},
		{"$echo", "$echo"},
		{"_Private", "_Private"},
		{"1Abc", "1Abc"},
		{"\xffAbc", "\xffAbc"},
	}
	for _, tc := range tests {
		if got := proxy.WireName(tc.in); got != tc.want {
			t.Errorf("WireName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// recorder is an Invoker that records the calls it gets.
type recorder struct {
	mu    sync.Mutex
	calls []*kernel.Invocation
	ctxs  []context.Context
	value any
	err   error
}

func (r *recorder) URL() *kernel.URL { return greeterURL }
func (r *recorder) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, inv)
	r.ctxs = append(r.ctxs, ctx)
	return kernel.Result{Value: r.value}, r.err
}
func (r *recorder) IsAvailable() bool { return true }
func (r *recorder) Destroy()          {}

type greeterStub struct {
	SayHello func(context.Context, string) (string, error)
	Echo     func(context.Context, string) (string, error) `weft:"$echo"`
	NoCtx    func(string) (string, error)
}

type calcStub struct {
	Add     func(ctx context.Context, a, b int32) (int64, error) // result converted
	Fail    func(context.Context) error
	Nothing func() error
	Skipped func() error `weft:"-"`
	Count   int
	hidden  func() error
}

func TestFillAgainstServiceInvoker(t *testing.T) {
	errFail := errors.New("locked")
	s := newGreeter(t, errFail)
	var stub greeterStub
	if err := proxy.Fill(&stub, func() (kernel.Invoker, error) { return s, nil }); err != nil {
		t.Fatalf("Fill: %v", err)
	}
	if stub.SayHello == nil || stub.Echo == nil || stub.NoCtx == nil {
		t.Fatal("Fill left a field nil")
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "stub")
	if got, err := stub.SayHello(ctx, "ann"); err != nil || got != "hello ann via stub" {
		t.Errorf("SayHello = %q, %v", got, err)
	}
	if got, err := stub.SayHello(nil, "ann"); err != nil || got != "hello ann" { // a nil ctx is allowed
		t.Errorf("SayHello(nil ctx) = %q, %v", got, err)
	}
	got, err := stub.SayHello(context.Background(), "")
	if !kernel.IsBiz(err) || !errors.Is(err, errEmptyName) || got != "" {
		t.Errorf("SayHello(\"\") = %q, %v; want biz error wrapping errEmptyName", got, err)
	}
	// The service has neither $echo nor noCtx: the invoker's error comes back.
	for name, call := range map[string]func() (string, error){
		"$echo": func() (string, error) { return stub.Echo(context.Background(), "x") },
		"noCtx": func() (string, error) { return stub.NoCtx("x") },
	} {
		got, err := call()
		if kernel.CodeOf(err) != kernel.CodeMethodNotFound || !strings.Contains(err.Error(), `"`+name+`"`) || got != "" {
			t.Errorf("%s = %q, %v; want method not found naming it", name, got, err)
		}
	}

	var calc calcStub
	if err := proxy.Fill(&calc, func() (kernel.Invoker, error) { return s, nil }); err != nil {
		t.Fatalf("Fill(calc): %v", err)
	}
	if calc.Skipped != nil || calc.hidden != nil {
		t.Error("Fill set a skipped field")
	}
	if n, err := calc.Add(context.Background(), 20, 22); err != nil || n != 42 {
		t.Errorf("Add = %d, %v; want 42", n, err)
	}
	if err := calc.Fail(context.Background()); !kernel.IsBiz(err) || !errors.Is(err, errFail) {
		t.Errorf("Fail = %v, want biz error wrapping errFail", err)
	}
	if err := calc.Nothing(); err != nil {
		t.Errorf("Nothing = %v", err)
	}
}

func TestFillWireNamesAndArgs(t *testing.T) {
	rec := &recorder{value: "ok"}
	var stub greeterStub
	if err := proxy.Fill(&stub, func() (kernel.Invoker, error) { return rec, nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	tests := []struct {
		name    string
		call    func() (string, error)
		method  string
		args    []any
		wantCtx bool
	}{
		{"field name lowered", func() (string, error) { return stub.SayHello(ctx, "a") }, "sayHello", []any{"a"}, true},
		{"tag", func() (string, error) { return stub.Echo(ctx, "b") }, "$echo", []any{"b"}, true},
		{"no context", func() (string, error) { return stub.NoCtx("c") }, "noCtx", []any{"c"}, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err != nil || got != "ok" {
				t.Fatalf("call = %q, %v", got, err)
			}
			if len(rec.calls) != i+1 {
				t.Fatalf("%d calls recorded, want %d", len(rec.calls), i+1)
			}
			inv := rec.calls[i]
			if inv.Method != tc.method {
				t.Errorf("wire method = %q, want %q", inv.Method, tc.method)
			}
			if !reflect.DeepEqual(inv.Args, tc.args) {
				t.Errorf("args = %#v, want %#v", inv.Args, tc.args)
			}
			c := rec.ctxs[i]
			if c == nil {
				t.Fatal("invoker got a nil context")
			}
			if hasV := c.Value(ctxKey{}) == "v"; hasV != tc.wantCtx {
				t.Errorf("caller's context passed = %v, want %v", hasV, tc.wantCtx)
			}
		})
	}
}

func TestFillResultsAndErrors(t *testing.T) {
	tests := []struct {
		name    string
		value   any
		err     error
		invErr  error
		want    int64
		code    kernel.Code
		wantErr error
	}{
		{"converted result", int32(7), nil, nil, 7, 0, nil},
		{"nil result is zero", nil, nil, nil, 0, 0, nil},
		{"invoker error", int64(9), kernel.Errorf(kernel.CodeNoProvider, "none"), nil, 0, kernel.CodeNoProvider, nil},
		{"biz error", nil, kernel.BizError(errEmptyName), nil, 0, kernel.CodeBiz, errEmptyName},
		{"result of the wrong type", "seven", nil, nil, 0, kernel.CodeSerialization, nil},
		{"invoker lookup error", nil, nil, errEmptyName, 0, kernel.CodeUnknown, errEmptyName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{value: tc.value, err: tc.err}
			var stub calcStub
			if err := proxy.Fill(&stub, func() (kernel.Invoker, error) { return rec, tc.invErr }); err != nil {
				t.Fatal(err)
			}
			got, err := stub.Add(context.Background(), 3, 4)
			if got != tc.want {
				t.Errorf("Add = %d, want %d", got, tc.want)
			}
			if tc.code == 0 && tc.wantErr == nil {
				if err != nil {
					t.Errorf("Add error %v", err)
				}
			} else {
				if err == nil {
					t.Fatal("Add returned no error")
				}
				if kernel.CodeOf(err) != tc.code {
					t.Errorf("CodeOf(%v) = %v, want %v", err, kernel.CodeOf(err), tc.code)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("errors.Is(%v, %v) = false", err, tc.wantErr)
				}
			}
			if tc.invErr != nil && len(rec.calls) != 0 {
				t.Error("invoker called although the lookup failed")
			}
			if err := stub.Fail(context.Background()); (err != nil) != (tc.err != nil || tc.invErr != nil) {
				t.Errorf("Fail = %v", err)
			}
		})
	}
}

func TestFillResolvesInvokerPerCall(t *testing.T) {
	a, b := &recorder{value: "a"}, &recorder{value: "b"}
	var cur kernel.Invoker = a
	lookups := 0
	var stub greeterStub
	if err := proxy.Fill(&stub, func() (kernel.Invoker, error) { lookups++; return cur, nil }); err != nil {
		t.Fatal(err)
	}
	if lookups != 0 {
		t.Errorf("Fill resolved the invoker %d times, want 0", lookups)
	}
	if got, _ := stub.NoCtx("x"); got != "a" {
		t.Errorf("first call = %q, want a", got)
	}
	cur = b
	if got, _ := stub.NoCtx("x"); got != "b" {
		t.Errorf("second call = %q, want b", got)
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want 2", lookups)
	}
}

func TestFillErrors(t *testing.T) {
	inv := func() (kernel.Invoker, error) { return &recorder{}, nil }
	n := 3
	tests := []struct {
		name string
		stub any
		want string
	}{
		{"nil", nil, "pointer to a struct"},
		{"struct value", greeterStub{}, "pointer to a struct"},
		{"pointer to non-struct", &n, "pointer to a struct"},
		{"no func fields", &struct{ A int }{}, "no exported func field"},
		{"only unexported func", &struct{ a func() error }{}, "no exported func field"},
		{"no error result", &struct{ F func(string) string }{}, "stub field"},
		{"no results", &struct{ F func(string) }{}, "stub field"},
		{"error not last", &struct{ F func() (error, string) }{}, "stub field"},
		{"two values", &struct{ F func() (string, string) }{}, "stub field"},
		{"three results", &struct{ F func() (int, string, error) }{}, "stub field"},
		{"variadic", &struct{ F func(...string) error }{}, "stub field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := proxy.Fill(tc.stub, inv)
			if err == nil {
				t.Fatalf("Fill(%T) succeeded, want error", tc.stub)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fill(%T) error %q, want it to contain %q", tc.stub, err, tc.want)
			}
		})
	}
	// The bad field is named.
	type badStub struct {
		Good func() error
		Bad  func() string
	}
	if err := proxy.Fill(&badStub{}, inv); err == nil || !strings.Contains(err.Error(), "badStub.Bad") {
		t.Errorf("Fill(badStub) = %v, want it to name badStub.Bad", err)
	}
}

type withStruct struct{}

type point struct{ X, Y int32 }

func (withStruct) Move(_ context.Context, p point) (int32, error) { return p.X + p.Y, nil }

// A date where a struct is expected is a conversion error: the date stays a
// value in the generic form, which conversion used to read as a map and
// panic on, taking the provider down (found by FuzzDecodeAndWalk).
func TestConvertDateToStructFails(t *testing.T) {
	s, err := proxy.NewServiceInvoker(kernel.MustParseURL("dubbo://h/S"), withStruct{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Invoke(context.Background(), kernel.NewInvocation("move", time.Unix(0, 0)))
	if kernel.CodeOf(err) != kernel.CodeSerialization || !strings.Contains(err.Error(), "time.Time") {
		t.Fatalf("err %v", err)
	}
	res, err := s.Invoke(context.Background(), kernel.NewInvocation("move", map[any]any{"x": int32(1), "y": int32(2)}))
	if err != nil || res.Value != int32(3) {
		t.Fatalf("%v %v", res.Value, err)
	}
}

// fastShapes has the fast path's three shapes, on a pointer receiver (called
// directly) and on a value receiver (reached through the pointer's method
// set, and, for a value impl, through reflect's method value).
type fastShapes struct{ tag string }

func (f *fastShapes) Echo(ctx context.Context, s string) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	if s == "panic" {
		panic("echo panicked")
	}
	if s == "fail" {
		return "", errors.New("echo failed")
	}
	return f.tag + s + ":" + inv.Method, nil
}

func (f *fastShapes) Store(_ context.Context, s string) error {
	if s == "" {
		return errors.New("empty")
	}
	f.tag = s
	return nil
}

func (f fastShapes) Bytes(_ context.Context, b []byte) ([]byte, error) {
	return append([]byte(f.tag), b...), nil
}

type valueShapes struct{ tag string }

func (v valueShapes) Echo(_ context.Context, s string) (string, error) { return v.tag + s, nil }

func TestFastPathReceivers(t *testing.T) {
	impl := &fastShapes{tag: "p:"}
	s, err := proxy.NewServiceInvoker(greeterURL, impl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := s.Invoke(ctx, kernel.NewInvocation("echo", "x")); err != nil || res.Value != "p:x:echo" {
		t.Fatalf("echo = %v, %v", res.Value, err)
	}
	if _, err := s.Invoke(ctx, kernel.NewInvocation("echo", "fail")); !kernel.IsBiz(err) || !strings.Contains(err.Error(), "echo failed") {
		t.Fatalf("echo(fail) = %v, want the business error", err)
	}
	_, err = s.Invoke(ctx, kernel.NewInvocation("echo", "panic"))
	var pe *proxy.PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "echo panicked") {
		t.Fatalf("echo(panic) = %v, want a PanicError", err)
	}
	// The receiver is the implementation itself, not a copy.
	if _, err := s.Invoke(ctx, kernel.NewInvocation("store", "q:")); err != nil || impl.tag != "q:" {
		t.Fatalf("store: %v, tag %q", err, impl.tag)
	}
	if _, err := s.Invoke(ctx, kernel.NewInvocation("store", "")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("store(\"\") = %v", err)
	}
	if res, err := s.Invoke(ctx, kernel.NewInvocation("bytes", []byte("b"))); err != nil || string(res.Value.([]byte)) != "q:b" {
		t.Fatalf("bytes = %v, %v", res.Value, err)
	}
	// An argument of another type takes the converting path.
	y := "y"
	if res, err := s.Invoke(ctx, kernel.NewInvocation("echo", &y)); err != nil || res.Value != "q:y:echo" {
		t.Fatalf("echo(*string) = %v, %v", res.Value, err)
	}

	v, err := proxy.NewServiceInvoker(greeterURL, valueShapes{tag: "v:"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Invoke(ctx, kernel.NewInvocation("echo", "x")); err != nil || res.Value != "v:x" {
		t.Fatalf("value receiver echo = %v, %v", res.Value, err)
	}
	// The fast path allocates nothing of its own: only the result's box.
	inv := kernel.NewInvocation("echo", "x")
	ctx = kernel.WithInvocation(ctx, inv)
	if n := testing.AllocsPerRun(200, func() { s.Invoke(ctx, inv) }); n > 2 {
		t.Errorf("a fast-path call allocates %.0f times, want at most 2 (the result string and its box)", n)
	}
}
