package config

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"HOST": "10.0.0.1", "PORT": "20880", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"no placeholder":                  "no placeholder",
		"dubbo://${HOST}:${PORT}":         "dubbo://10.0.0.1:20880",
		"${MISSING:127.0.0.1}:${PORT:1}":  "127.0.0.1:20880",
		"${MISSING:}":                     "",
		"${EMPTY:default}":                "",
		"a $${HOST} stays":                "a ${HOST} stays",
		"${MISSING:nacos://h:8848?x=y}":   "nacos://h:8848?x=y",
		"$HOST and {HOST} are left alone": "$HOST and {HOST} are left alone",
	} {
		got, err := Expand(in, lookup)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"${MISSING}":  "the environment variable MISSING is not set; set it, or give a default: ${MISSING:default}",
		"${HOST":      "a ${ without its }",
		"${1X}":       `"1X" is not an environment variable's name`,
		"${}":         `"" is not an environment variable's name`,
		"x ${A-B:c} ": `"A-B" is not an environment variable's name`,
	} {
		if _, err := Expand(in, lookup); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Expand(%q): err %v, want one containing %q", in, err, want)
		}
	}
}
