package weft

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseJSONMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12.5e3`, `-1E-2`, `"x"`,
		` {"token":"s3cret","limit":5} `,
		`{"a":[1,"two",{"b":null}],"c":{"d":[true,false]},"e":""}`,
		`"esc: \" \\ \/ \b \f \n \r \t \u00e9 \u20AC \ud83d\ude00"`,
		`"lone surrogate \ud800 then \u0041"`, `"\ud800\u0041"`,
		`{"dup":1,"dup":2}`, `[ 1 , 2 ]`, "\"h\xffi\"", `"日本語"`,
		`1e400`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `+1`, `tru`, `"abc`,
		`{"a" 1}`, `{1:2}`, `[1 2]`, `"\x"`, "\"a\tb\"", `nul`, `{} x`, ``, `-`,
	} {
		var want any
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := parseJSON(in)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%q: err = %v, encoding/json err = %v", in, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, want %#v", in, got, want)
		}
	}
}

func TestParseJSONDepth(t *testing.T) {
	deep := ""
	for range maxJSONDepth + 1 {
		deep += "["
	}
	if _, err := parseJSON(deep); err == nil {
		t.Fatal("no error for a too deep value")
	}
}

func TestHeadersJSON(t *testing.T) {
	in := map[string]string{"x-user": `a"b\c`, "ctl": "\x01\t", "utf8": "日本\xff", "e": ""}
	var got map[string]string
	if err := json.Unmarshal([]byte(headersJSON(in)), &got); err != nil {
		t.Fatalf("%s: %v", headersJSON(in), err)
	}
	in["utf8"] = "日本\uFFFD"
	if !reflect.DeepEqual(got, in) {
		t.Errorf("got %q, want %q", got, in)
	}
}
