package token

import (
	"regexp"
	"testing"
)

func TestResolve(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, in := range []string{"true", "default", "1", "true"} {
		got, err := Resolve(in)
		if err != nil || !uuid.MatchString(got) || seen[got] {
			t.Fatalf("Resolve(%q) = %q, %v: want a fresh random UUID", in, got, err)
		}
		seen[got] = true
	}
	for in, want := range map[string]string{"": "", "false": "", "0": "", "s3cret": "s3cret"} {
		if got, err := Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
