package idl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

const testProto = `syntax = "proto3";
package t.v1;
import "google/protobuf/timestamp.proto";

enum Kind { KIND_UNSET = 0; KIND_A = 1; }
message Node {
  string name = 1;
  int64 big = 2;
  repeated Node children = 3;
  map<string, int32> counts = 4;
  bytes blob = 5;
  Kind kind = 6;
  double ratio = 7;
  google.protobuf.Timestamp at = 8;
}
service Tree { rpc Put (Node) returns (Node); }
`

func load(t *testing.T) (*Interface, *Method) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tree.proto")
	if err := os.WriteFile(p, []byte(testProto), 0o644); err != nil {
		t.Fatal(err)
	}
	it, err := LoadProto(p, "Tree", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := it.Method("put") // a Java caller's spelling
	if !ok {
		t.Fatal("no method put")
	}
	return it, m
}

// A message is built from a generic value as hessian2 and JSON callers send
// it: any number kind, 64-bit numbers in strings, enums by name, bytes in
// base64, nested messages as maps, and read back into generic form.
func TestMessageFromGenericValue(t *testing.T) {
	_, m := load(t)
	v := map[string]any{
		"class": "t.v1.Node", "name": "root", "big": "9007199254740993", "kind": "KIND_A", "ratio": int32(2),
		"blob": "aGk=", "counts": map[string]any{"a": int64(1)},
		"children": []any{map[string]any{"name": "leaf", "big": float64(7)}},
	}
	msg, err := toMessage(v, m.In)
	if err != nil {
		t.Fatal(err)
	}
	back := messageValue(msg, "", 0)
	if back["name"] != "root" || back["big"] != int64(9007199254740993) || back["kind"] != "KIND_A" || back["ratio"] != 2.0 ||
		string(back["blob"].([]byte)) != "hi" || back["counts"].(map[string]any)["a"] != int32(1) ||
		back["children"].([]any)[0].(map[string]any)["big"] != int64(7) {
		t.Fatalf("round trip: %#v", back)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"nmae": "x"}, `no field "nmae" (fields: name, big, children, counts, blob, kind, ratio, at)`},
		{map[string]any{"big": 1.5}, "big: a number where int64 is declared"},
		{map[string]any{"kind": "KIND_B"}, `"KIND_B" is no value of t.v1.Kind`},
		{map[string]any{"children": "x"}, "children: a string where a list is declared"},
		{"x", "a string where a message (an object of its fields) is declared"},
	} {
		if _, err := toMessage(c.v, m.In); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%#v: %v, want %q", c.v, err, c.want)
		}
	}
}

// Hostile generic values: a map that contains itself, and nesting deeper
// than any message should be, end in an error, not a stack overflow.
func TestMessageFromHostileValue(t *testing.T) {
	_, m := load(t)
	cyc := map[string]any{"name": "c"}
	cyc["children"] = []any{cyc}
	if _, err := toMessage(cyc, m.In); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("cycle: %v", err)
	}
	deep := map[string]any{}
	cur := deep
	for range 5000 {
		next := map[string]any{}
		cur["children"] = []any{next}
		cur = next
	}
	if _, err := toMessage(deep, m.In); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep: %v", err)
	}
}

type encoded struct {
	enc string
	b   []byte
}

func (e encoded) Encoding() string { return e.enc }
func (e encoded) Bytes() []byte    { return e.b }

// The Invoker answers a caller in the form it called in: a message to one
// that sent protobuf or its JSON, a generic value to a hessian2 caller;
// Java-typed methods get their arguments in their Java types.
func TestInvokerForms(t *testing.T) {
	it, m := load(t)
	echo := HandlerFunc(func(ctx context.Context, c *Call) (kernel.Result, error) {
		return kernel.Result{Value: c.Args[0]}, nil
	})
	iv := NewInvoker(kernel.NewURL("tri", "127.0.0.1", 0, it.Name, nil), it, echo)
	req := dynamicpb.NewMessage(m.In)
	req.Set(m.In.Fields().ByName("name"), protoreflect.ValueOfString("n"))
	b, _ := proto.Marshal(req)
	ctx := context.Background()
	res, err := iv.Invoke(ctx, kernel.NewInvocation("Put", encoded{"proto", b}))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := res.Value.(*dynamicpb.Message); !ok || got.Get(m.Out.Fields().ByName("name")).String() != "n" {
		t.Fatalf("proto caller got %#v", res.Value)
	}
	res, err = iv.Invoke(ctx, kernel.NewInvocation("put", map[string]any{"name": "h"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := res.Value.(map[string]any); !ok || got["name"] != "h" {
		t.Fatalf("hessian2 caller got %#v", res.Value)
	}
	if _, err := iv.Invoke(ctx, kernel.NewInvocation("nope")); kernel.CodeOf(err) != kernel.CodeMethodNotFound {
		t.Fatalf("unknown method: %v", err)
	}

	table, err := FromTable("org.example.Calc", map[string]MethodTypes{"add": {Params: []string{"int", "long"}, Returns: "long"}})
	if err != nil {
		t.Fatal(err)
	}
	var seen []any
	sum := HandlerFunc(func(ctx context.Context, c *Call) (kernel.Result, error) {
		seen = c.Args
		return kernel.Result{Value: float64(c.Args[0].(int32)) + float64(c.Args[1].(int64))}, nil
	})
	tv := NewInvoker(kernel.NewURL("dubbo", "127.0.0.1", 0, "org.example.Calc", nil), table, sum)
	res, err = tv.Invoke(ctx, kernel.NewInvocation("add", encoded{"json", []byte("2")}, float64(40)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != int64(42) || seen[0] != int32(2) || seen[1] != int64(40) {
		t.Fatalf("add: %#v (args %#v)", res.Value, seen)
	}
	if _, err := tv.Invoke(ctx, kernel.NewInvocation("add", "x", 1)); err == nil || !strings.Contains(err.Error(), "argument 0: a string where int is declared") {
		t.Fatalf("bad argument: %v", err)
	}
	if _, err := tv.Invoke(ctx, kernel.NewInvocation("add", int64(1)<<40, 1)); err == nil || !strings.Contains(err.Error(), "where int is declared") {
		t.Fatalf("out of range: %v", err)
	}
}

func TestJavaClass(t *testing.T) {
	_, m := load(t)
	// tree.proto's outer class would be Tree, the service's name: protoc
	// adds OuterClass.
	if got := JavaClass(m.In); got != "t.v1.TreeOuterClass$Node" {
		t.Fatalf("JavaClass %s, want t.v1.TreeOuterClass$Node", got)
	}
	p := filepath.Join(t.TempDir(), "hello_world.proto")
	os.WriteFile(p, []byte(`syntax = "proto3"; package a.b; option java_package = "com.x"; message M { message N {} } service S { rpc X (M.N) returns (M); }`), 0o644)
	it, err := LoadProto(p, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := it.Method("X")
	if got := JavaClass(x.In); got != "com.x.HelloWorld$M$N" {
		t.Fatalf("JavaClass %s, want com.x.HelloWorld$M$N", got)
	}
}

// A descriptor set written by protoc reads as the .proto does; a file over
// the size limit is refused before it is parsed.
func TestDescriptorSetAndLimits(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tree.proto")
	if err := os.WriteFile(src, []byte(testProto), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("protoc"); err == nil {
		set := filepath.Join(dir, "tree.pb")
		out, err := exec.Command("protoc", "-I", dir, "--include_imports", "-o", set, src).CombinedOutput()
		if err != nil {
			t.Fatalf("protoc: %v %s", err, out)
		}
		it, err := LoadProto(set, "t.v1.Tree", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := it.Method("Put"); !ok || it.File().Path() != "tree.proto" {
			t.Fatalf("descriptor set: %v", it.MethodNames())
		}
	} else {
		t.Log("protoc not installed: the descriptor set case is not run (.ci/run installs protobuf-compiler)")
	}
	big := filepath.Join(dir, "big.proto")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProto(big, "", nil, nil); err == nil || !strings.Contains(err.Error(), "is over") {
		t.Fatalf("big file: %v", err)
	}
	self := filepath.Join(dir, "self.proto")
	os.WriteFile(self, []byte(`syntax = "proto3"; import "self.proto";`), 0o644)
	if _, err := LoadProto(self, "", nil, nil); err == nil {
		t.Fatal("a file that imports itself compiled")
	}
}

// FuzzToMessage: whatever bytes a caller sends — as a protobuf message, as
// its JSON, or as a generic value — become a message of the declared type
// or an error, and the message is then walked into generic form, never a
// crash or a stack overflow.
func FuzzToMessage(f *testing.F) {
	p := filepath.Join(f.TempDir(), "tree.proto")
	if err := os.WriteFile(p, []byte(testProto), 0o644); err != nil {
		f.Fatal(err)
	}
	it, err := LoadProto(p, "Tree", nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	m, _ := it.Method("Put")
	f.Add([]byte(`{"name":"x","children":[{"name":"y","counts":{"a":1}}],"big":"12"}`))
	f.Add([]byte{0x1a, 0x02, 0x1a, 0x00})
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{encoded{"proto", b}, encoded{"json", b}} {
			if msg, err := toMessage(v, m.In); err == nil {
				_ = messageValue(msg, "", 0)
			}
		}
		if args, err := proxy.JSONArgs("[" + string(b) + "]"); err == nil && len(args) == 1 {
			if msg, err := toMessage(args[0], m.In); err == nil {
				_ = messageValue(msg, "", 0)
			}
			_, _ = javaValue(args[0], "long")
		}
	})
}
