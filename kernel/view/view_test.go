package view

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(JSON(v))
	if err != nil {
		t.Fatalf("json.Marshal of the JSON view: %v", err)
	}
	return string(b)
}

func TestCyclicList(t *testing.T) {
	l := make([]any, 1)
	l[0] = l // what `79 51 90` decodes to: a list whose only element is itself
	if got := mustJSON(t, l); got != `["(cycle)"]` {
		t.Fatalf("JSON = %s", got)
	}
	g := Generic(l).([]any)
	inner, ok := g[0].([]any)
	if !ok || len(inner) != 1 || &inner[0] != &g[0] {
		t.Fatalf("generic form lost the cycle: %#v", g[0])
	}
}

func TestCyclicMapAndPointers(t *testing.T) {
	m := map[any]any{"a": 1}
	m["self"] = m
	if got := mustJSON(t, m); got != `{"a":1,"self":"(cycle)"}` {
		t.Fatalf("JSON = %s", got)
	}
	type node struct {
		Name string
		Next *node
	}
	n := &node{Name: "x"}
	n.Next = n
	if got := mustJSON(t, n); got != `{"name":"x","next":"(cycle)"}` {
		t.Fatalf("JSON = %s", got)
	}
	g := Generic(n).(map[string]any)
	if next, ok := g["next"].(map[string]any); !ok || next["name"] != "x" {
		t.Fatalf("generic = %#v", g)
	}
}

// A DAG: each level refers twice to the one below. Expanded it has 2^64
// leaves; the JSON view stops at its node budget, the generic form shares.
func TestSharedListsDoNotExpand(t *testing.T) {
	var l any = []any{"leaf"}
	for range 64 {
		l = []any{l, l}
	}
	start := time.Now()
	b, err := json.Marshal(JSON(l))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 200<<10 || !strings.Contains(string(b), Truncated) {
		t.Fatalf("JSON view of %d bytes, marker present: %v", len(b), strings.Contains(string(b), Truncated))
	}
	g := Generic(l)
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	top := g.([]any)
	a, _ := top[0].([]any)
	c, _ := top[1].([]any)
	if len(a) != 2 || &a[0] != &c[0] {
		t.Fatal("generic form did not keep the shared list shared")
	}
}

func TestDeepNesting(t *testing.T) {
	var v any = "bottom"
	for range 100_000 {
		v = []any{v}
	}
	got := mustJSON(t, v)
	if !strings.Contains(got, TooDeep) || strings.Count(got, "[") != JSONLimits.MaxDepth+1 {
		t.Fatalf("depth cut wrong: %d brackets", strings.Count(got, "["))
	}
	// The generic form cuts at its own depth (nil below).
	g := Generic(v)
	depth := 0
	for x, ok := g.([]any); ok; x, ok = x[0].([]any) {
		depth++
		if x[0] == nil {
			break
		}
	}
	if depth != GenericLimits.MaxDepth+1 {
		t.Fatalf("generic depth %d", depth)
	}
}

func TestJSONAlwaysEncodes(t *testing.T) {
	v := []any{
		math.NaN(), math.Inf(1), []float64{math.NaN()},
		time.UnixMilli(math.MaxInt64), // year 292278994: encoding/json refuses it
		make(chan int), func() {}, complex(1, 2),
		map[any]any{int32(1): "one", 2.5: "x", true: nil, nil: 1},
		[]byte("bytes"), strings.Repeat("é", 1000),
	}
	got := mustJSON(t, v)
	for _, want := range []string{`"NaN"`, `"+Inf"`, `"(chan int)"`, `"Ynl0ZXM="`, `…(2000 bytes)`, `"1":"one"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in %s", want, got)
		}
	}
}

// One long string referred to from a million places must not become a
// terabyte of output.
func TestBytesBudget(t *testing.T) {
	big := []any{strings.Repeat("x", 1<<20)}
	l := make([]any, 1<<20)
	for i := range l {
		l[i] = big
	}
	b, err := json.Marshal(JSONWith(l, Limits{MaxDepth: 64, MaxNodes: 1 << 22, MaxBytes: 4 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 5<<20 {
		t.Fatalf("output %d bytes", len(b))
	}
}

func TestCut(t *testing.T) {
	if got := Cut("héllo", 2); got != "h…(6 bytes)" {
		t.Fatalf("Cut = %q", got)
	}
	if got := Cut("abc", 5); got != "abc" {
		t.Fatalf("Cut = %q", got)
	}
}

type pojo struct {
	Name  string `hessian:"fullName"`
	Age   int32
	Skip  string `hessian:"-"`
	inner int
}

func (pojo) JavaClassName() string { return "org.example.User" }

func TestGenericStructs(t *testing.T) {
	g := Generic([]any{pojo{Name: "a", Age: 3, Skip: "s", inner: 1}, &pojo{Name: "b"}, []int32{1, 2}})
	l := g.([]any)
	m := l[0].(map[string]any)
	if m["fullName"] != "a" || m["age"] != int32(3) || m["class"] != "org.example.User" || len(m) != 3 {
		t.Fatalf("struct = %#v", m)
	}
	if p := l[1].(map[string]any); p["fullName"] != "b" {
		t.Fatalf("pointer = %#v", p)
	}
	if ints, ok := l[2].([]int32); !ok || len(ints) != 2 {
		t.Fatalf("typed list = %#v", l[2])
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(Limits{MaxDepth: 3, MaxNodes: 5})
	for i := range 5 {
		if err := b.Visit(1); err != nil {
			t.Fatalf("visit %d: %v", i, err)
		}
	}
	if err := b.Visit(1); err == nil {
		t.Fatal("sixth visit allowed")
	}
	if err := NewBudget(Limits{MaxDepth: 3}).Visit(4); err == nil {
		t.Fatal("depth 4 allowed")
	}
}

func TestText(t *testing.T) {
	l := make([]any, 1)
	l[0] = l
	type node struct {
		Name string
		Kids []any
	}
	key := &node{Name: "k", Kids: l}
	for v, want := range map[any]string{
		"s": "s", int32(7): "7", 2.5: "2.5", true: "true",
	} {
		if got := Text(v); got != want {
			t.Errorf("Text(%#v) = %q", v, got)
		}
	}
	if got := Text(l); got != `["(cycle)"]` {
		t.Errorf("Text(cyclic) = %q", got)
	}
	if got := Text(key); got != `{"kids":["(cycle)"],"name":"k"}` {
		t.Errorf("Text(pointer to a struct holding a cycle) = %q", got)
	}
	// A map keyed by such a pointer: the key is formatted boundedly too.
	if got := mustJSON(t, map[any]any{key: 1}); !strings.Contains(got, "(cycle)") {
		t.Errorf("key = %s", got)
	}
	if got := Text(strings.Repeat("x", 10000)); len(got) != 10000 {
		t.Errorf("a plain string is kept: %d bytes", len(got))
	}
	if got := Text([]any{strings.Repeat("x", 10000)}); len(got) > 400 {
		t.Errorf("a string inside a value is cut: %d bytes", len(got))
	}
}
