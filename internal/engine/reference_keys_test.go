package engine

import (
	"reflect"
	"testing"
)

func TestJavaTypes(t *testing.T) {
	for desc, want := range map[string][]string{
		"":                                      nil,
		"Ljava/lang/String;J":                   {"java.lang.String", "long"},
		"[I[[Lorg/example/User;Z":               {"int[]", "org.example.User[][]", "boolean"},
		"Ljava/lang/String":                     nil, // no ';'
		"Q":                                     nil,
		"[":                                     nil,
		"Ljava/lang/String;[Ljava/lang/Object;": {"java.lang.String", "java.lang.Object[]"},
	} {
		if got := javaTypes(desc); !reflect.DeepEqual(got, want) {
			t.Errorf("javaTypes(%q) = %q, want %q", desc, got, want)
		}
	}
}
