package cluster

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// Java's ResultMergerTest vectors, over the Go values the Java types
// decode into (hessian2: typed lists as typed slices, ArrayList as []any,
// HashMap as map[any]any).
func TestMergersJavaVectors(t *testing.T) {
	cases := []struct {
		name, merger string
		in           []any
		want         any
	}{
		{"array of strings", "true", []any{[]string{"1", "2", "3"}, []string{"4", "5", "6"}, []string{}, nil}, []string{"1", "2", "3", "4", "5", "6"}},
		{"Integer[] by type", "true", []any{[]int32{1, 2, 3}, []int32{4, 5, 6}, []int32{7}, nil}, []int32{1, 2, 3, 4, 5, 6, 7}},
		{"merge(null)", "true", []any{nil}, nil},
		{"merge(null, null)", "true", []any{nil, nil}, nil},
		{"merge(null, Object[0])", "true", []any{nil, []any{}}, []any{}},
		{"boolean", "boolean", []any{[]bool{true, false}, []bool{false}, nil}, []bool{true, false, false}},
		{"byte", "byte", []any{[]byte{1, 2}, []byte{1, 32}}, []byte{1, 2, 1, 32}},
		{"char as string", "char", []any{"hello", "world"}, "helloworld"},
		{"char as runes", "char", []any{[]rune("hello"), []rune("world")}, []rune("helloworld")},
		{"double", "double", []any{[]float64{1.2, 3.5}, []float64{2, 34}}, []float64{1.2, 3.5, 2, 34}},
		{"float", "float", []any{[]float32{1.2, 3.5}, []float32{2, 34}}, []float32{1.2, 3.5, 2, 34}},
		{"int", "int", []any{[]int32{1, 2}, []int32{2, 34}}, []int32{1, 2, 2, 34}},
		{"long", "long", []any{[]int64{1, 2}, []int64{2, 34}}, []int64{1, 2, 2, 34}},
		{"short", "short", []any{[]int16{1, 2}, []int16{2, 34}}, []int16{1, 2, 2, 34}},
		{"primitive merge(null, null)", "int", []any{nil, nil}, nil},
		{"list keeps nulls", "list", []any{[]any{nil, "1", "2"}, []any{"3", "4"}, nil}, []any{nil, "1", "2", "3", "4"}},
		{"map", "map", []any{map[any]any{"11": int32(222), "223": int32(11)}, map[any]any{"3333": int32(3232), "444": int32(2323)}, nil},
			map[any]any{"11": int32(222), "223": int32(11), "3333": int32(3232), "444": int32(2323)}},
		{"set as list", "set", []any{[]any{nil, "1", "2"}, []any{"2", "3"}, nil}, []any{nil, "1", "2", "3"}},
		{"set as map", "set", []any{map[string]bool{"1": true, "2": true}, map[string]bool{"2": true, "3": true}}, map[string]bool{"1": true, "2": true, "3": true}},
		// Later groups win a key, as HashMap.putAll does.
		{"map later wins", "true", []any{map[string]int{"a": 1, "b": 1}, map[string]int{"b": 2}}, map[string]int{"a": 1, "b": 2}},
		// A Java provider's ArrayList and a Go provider's []string in one merge.
		{"lists of two types", "list", []any{[]string{"a"}, []any{"b", int32(1)}}, []any{"a", "b", int32(1)}},
		{"one answer", "true", []any{nil, "only"}, "only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Merge(c.merger, c.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestMergerErrorsSayWhy(t *testing.T) {
	cases := []struct {
		merger string
		in     []any
		want   string
	}{
		// Java: ArrayMerger(String[], null, Integer[]) throws.
		{"int", []any{[]string{"1"}, nil, []int32{1}}, "Arguments' types are different ([]string, []int32)"},
		{"default", []any{&menu{}, &menu{}}, "There is no merger to merge result."},
		{"true", []any{map[string]any{"_class": "org.example.Menu"}, map[string]any{"_class": "org.example.Menu"}}, "There is no merger to merge result."},
		{"nosuch", []any{[]int32{1}, []int32{2}}, `There is no merger to merge result. (merger "nosuch"; known: boolean, byte, char, default, double, float, int, list, long, map, set, short, true`},
		{".merge", []any{[]int32{1}, []int32{2}}, "Can not merge result because missing method [ merge ] in class [ []int32 ]"},
		{".merge", []any{map[string]any{"_class": "M"}, map[string]any{"_class": "M"}}, "register the type with hessian2.RegisterPOJO"},
		{"map", []any{[]int32{1}, []int32{2}}, "merger map merges maps, and the answers are []int32"},
	}
	for _, c := range cases {
		_, err := Merge(c.merger, c.in, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("merger %s: err %v, want it to say %q", c.merger, err, c.want)
		}
	}
}

// Java's test SPIs intsum and intfirst, as mergers of the program's own.
func TestCustomMergers(t *testing.T) {
	mergers := MergerMap{
		"intsum": MergerFunc(func(answers []any) (any, error) {
			sum := int32(0)
			for _, a := range answers {
				n, ok := a.(int32)
				if !ok {
					return nil, errors.New("intsum: not an int")
				}
				sum += n
			}
			return sum, nil
		}),
		"intfirst": MergerFunc(func(answers []any) (any, error) { return answers[0], nil }),
	}
	var in []any
	for i := range 100 {
		in = append(in, int32(i+1))
	}
	if got, err := Merge("intsum", in, mergers); err != nil || got != int32(5050) {
		t.Fatalf("intsum(1..100) = %v, %v; want 5050", got, err)
	}
	if got, err := Merge("intfirst", []any{nil, int32(1), int32(2), int32(3), int32(4)}, mergers); err != nil || got != int32(1) {
		t.Fatalf("intfirst = %v, %v; want 1 (nils left out)", got, err)
	}
	if err := CheckMerger("intsum", mergers); err != nil {
		t.Fatal(err)
	}
	err := CheckMerger("intsun", mergers)
	if err == nil || !strings.Contains(err.Error(), `unknown merger "intsun"`) || !strings.Contains(err.Error(), "intfirst, intsum") {
		t.Fatalf("CheckMerger(intsun): %v", err)
	}
	for _, ok := range []string{"", "false", "N/A", "true", "default", "list", ".merge"} {
		if err := CheckMerger(ok, nil); err != nil {
			t.Errorf("CheckMerger(%q): %v", ok, err)
		}
	}
	if err := CheckMerger(".", nil); err == nil {
		t.Error("CheckMerger(.) passed")
	}
}

// menu is MergeableClusterInvokerTest's MenuService result: a Menu merges
// another into itself (Java's void merge(Menu)).
type menu struct {
	Menus map[string][]int32
}

func (m *menu) Merge(o *menu) {
	for k, v := range o.Menus {
		m.Menus[k] = append(m.Menus[k], v...)
	}
}

// sum merges by returning a new value, with an error when it cannot.
type sum struct{ N int }

func (s sum) Add(o sum) (sum, error) {
	if o.N < 0 {
		return sum{}, errors.New("negative")
	}
	return sum{s.N + o.N}, nil
}

func TestMethodMerger(t *testing.T) {
	first := &menu{Menus: map[string][]int32{"1": {10, 11, 12}, "2": {20, 21, 22}}}
	second := &menu{Menus: map[string][]int32{"2": {23, 24, 25}, "3": {30, 31, 32}}}
	got, err := Merge(".merge", []any{first, second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int32{"1": {10, 11, 12}, "2": {20, 21, 22, 23, 24, 25}, "3": {30, 31, 32}}
	if m := got.(*menu); !reflect.DeepEqual(m.Menus, want) {
		t.Fatalf("merged %v, want %v", m.Menus, want)
	}
	// void with every answer nil (Java's addMenu): nil.
	if got, err := Merge(".merge", []any{nil, nil}, nil); err != nil || got != nil {
		t.Fatalf("void: %v %v", got, err)
	}
	// A method returning the merged value (Java: its result is kept), with
	// a Go error last; Name found from Java's lower-case name.
	if got, err := Merge(".add", []any{sum{1}, sum{2}, sum{3}}, nil); err != nil || got != (sum{6}) {
		t.Fatalf(".add: %v %v", got, err)
	}
	if _, err := Merge(".Add", []any{sum{1}, sum{-2}}, nil); err == nil || !strings.Contains(err.Error(), "Can not merge result: cluster.sum.Add: negative") {
		t.Fatalf(".Add with an error: %v", err)
	}
	// A value whose method has a pointer receiver: merged through a copy.
	v, err := Merge(".merge", []any{tally{1}, tally{2}, tally{3}}, nil)
	if err != nil || v != (tally{6}) {
		t.Fatalf("pointer receiver on values: %v %v", v, err)
	}
	// A method of another shape is refused, saying which it wants.
	if _, err := Merge(".merge", []any{menu{}, menu{}}, nil); err == nil || !strings.Contains(err.Error(), "method merge of cluster.menu is func(*cluster.menu)") {
		t.Fatalf("wrong shape: %v", err)
	}
}

type tally struct{ N int }

func (t *tally) Merge(o tally) { t.N += o.N }

// decodable stands for a protobuf message whose type its reader names.
type decodable struct{ v any }

func (d decodable) DecodeAs(t reflect.Type) (reflect.Value, error) {
	v := reflect.ValueOf(d.v)
	if !v.Type().AssignableTo(t) {
		return reflect.Value{}, errors.New("wrong type")
	}
	return v, nil
}

// Answers still in their wire form merge once the caller's type is known.
func TestMergeDecodableLater(t *testing.T) {
	got, err := Merge(".merge", []any{
		decodable{&menu{Menus: map[string][]int32{"1": {1}}}},
		decodable{&menu{Menus: map[string][]int32{"1": {2}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := got.(kernel.Decodable)
	if !ok {
		t.Fatalf("got %T, want a kernel.Decodable", got)
	}
	v, err := d.DecodeAs(reflect.TypeFor[*menu]())
	if err != nil || !reflect.DeepEqual(v.Interface().(*menu).Menus["1"], []int32{1, 2}) {
		t.Fatalf("decoded %v %v", v, err)
	}
	got, _ = Merge("list", []any{decodable{[]string{"a"}}, decodable{[]string{"b"}}}, nil)
	v, err = got.(kernel.Decodable).DecodeAs(reflect.TypeFor[[]string]())
	if err != nil || !reflect.DeepEqual(v.Interface(), []string{"a", "b"}) {
		t.Fatalf("decoded %v %v", v, err)
	}
}
