package kernel_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		protocol string
		user     string
		pass     string
		host     string
		port     int
		path     string
		address  string
		params   map[string]string
		str      string
	}{
		{
			name:     "full, params sorted in canonical form",
			raw:      "dubbo://user:pw@127.0.0.1:20880/org.example.Greeter?b=2&a=1",
			protocol: "dubbo", user: "user", pass: "pw", host: "127.0.0.1", port: 20880,
			path: "org.example.Greeter", address: "127.0.0.1:20880",
			params: map[string]string{"a": "1", "b": "2"},
			str:    "dubbo://user:pw@127.0.0.1:20880/org.example.Greeter?a=1&b=2",
		},
		{
			name:     "no port",
			raw:      "zookeeper://zk.local/registry?timeout=3000",
			protocol: "zookeeper", host: "zk.local", port: 0, path: "registry", address: "zk.local",
			params: map[string]string{"timeout": "3000"},
			str:    "zookeeper://zk.local/registry?timeout=3000",
		},
		{
			name:     "IPv6 with port",
			raw:      "tri://[::1]:20880/svc",
			protocol: "tri", host: "::1", port: 20880, path: "svc", address: "[::1]:20880",
			params: map[string]string{},
			str:    "tri://[::1]:20880/svc",
		},
		{
			name:     "IPv6 without port",
			raw:      "tri://[::1]/svc",
			protocol: "tri", host: "::1", path: "svc", address: "::1",
			params: map[string]string{},
			str:    "tri://::1/svc",
		},
		{
			name:     "user without password",
			raw:      "nacos://admin@10.0.0.1:8848",
			protocol: "nacos", user: "admin", host: "10.0.0.1", port: 8848, address: "10.0.0.1:8848",
			params: map[string]string{},
			str:    "nacos://admin@10.0.0.1:8848",
		},
		{
			name:     "escaped values and names, empty value, no value, empty pairs",
			raw:      "dubbo://h:1/p?msg=hello%20world&expr=1%2B1&plus=a+b&k%3Dx=v%26w&empty=&bare&&",
			protocol: "dubbo", host: "h", port: 1, path: "p", address: "h:1",
			params: map[string]string{
				"msg": "hello world", "expr": "1+1", "plus": "a b", "k=x": "v&w", "empty": "", "bare": "",
			},
			str: "dubbo://h:1/p?bare=&empty=&expr=1%2B1&k%3Dx=v%26w&msg=hello+world&plus=a+b",
		},
		{
			name:     "surrounding space trimmed",
			raw:      "  dubbo://h:2/p?x=1 \n",
			protocol: "dubbo", host: "h", port: 2, path: "p", address: "h:2",
			params: map[string]string{"x": "1"},
			str:    "dubbo://h:2/p?x=1",
		},
		{
			name:     "query without path",
			raw:      "dubbo://h:3?x=1",
			protocol: "dubbo", host: "h", port: 3, address: "h:3",
			params: map[string]string{"x": "1"},
			str:    "dubbo://h:3?x=1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := kernel.ParseURL(tc.raw)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tc.raw, err)
			}
			if u.Protocol != tc.protocol || u.Username != tc.user || u.Password != tc.pass ||
				u.Host != tc.host || u.Port != tc.port || u.Path != tc.path {
				t.Errorf("parts = %q %q %q %q %d %q, want %q %q %q %q %d %q",
					u.Protocol, u.Username, u.Password, u.Host, u.Port, u.Path,
					tc.protocol, tc.user, tc.pass, tc.host, tc.port, tc.path)
			}
			if got := u.Address(); got != tc.address {
				t.Errorf("Address() = %q, want %q", got, tc.address)
			}
			if got := u.Params(); !maps.Equal(got, tc.params) {
				t.Errorf("Params() = %v, want %v", got, tc.params)
			}
			if got := u.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			// The canonical form parses back to the same URL.
			u2, err := kernel.ParseURL(u.String())
			if err != nil {
				t.Fatalf("ParseURL(String()=%q): %v", u.String(), err)
			}
			if u2.String() != u.String() || !maps.Equal(u2.Params(), u.Params()) ||
				u2.Host != u.Host || u2.Port != u.Port || u2.Path != u.Path ||
				u2.Username != u.Username || u2.Password != u.Password {
				t.Errorf("round trip: %q -> %q (params %v vs %v)", u.String(), u2.String(), u2.Params(), u.Params())
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string // substring of the error
	}{
		{"missing scheme separator", "127.0.0.1:20880/svc", "protocol://"},
		{"empty protocol", "://127.0.0.1:20880/svc", "protocol://"},
		{"empty", "", "protocol://"},
		{"non-numeric port", "dubbo://127.0.0.1:abc/svc", "bad port"},
		{"port too large", "dubbo://127.0.0.1:65536/svc", "bad port"},
		{"negative port", "dubbo://127.0.0.1:-1/svc", "bad port"},
		{"empty port", "dubbo://127.0.0.1:/svc", "bad port"},
		{"bad escape in value", "dubbo://h:1/p?a=%zz", "bad value"},
		{"bad escape in name", "dubbo://h:1/p?%zz=1", "bad parameter name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := kernel.ParseURL(tc.raw)
			if err == nil {
				t.Fatalf("ParseURL(%q) = %q, want error", tc.raw, u)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseURL(%q) error %q, want it to contain %q", tc.raw, err, tc.want)
			}
		})
	}
}

func TestMustParseURLPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParseURL of a bad URL did not panic")
		}
	}()
	kernel.MustParseURL("no-scheme")
}

func TestNewURL(t *testing.T) {
	p := map[string]string{"b": "2", "a": "1"}
	u := kernel.NewURL("dubbo", "10.0.0.1", 20880, "/org.example.Greeter", p)
	p["a"] = "changed" // params are copied
	if got, want := u.String(), "dubbo://10.0.0.1:20880/org.example.Greeter?a=1&b=2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if u.Path != "org.example.Greeter" {
		t.Errorf("Path = %q, want leading slash trimmed", u.Path)
	}
}

func TestMethodParam(t *testing.T) {
	u := kernel.MustParseURL("dubbo://h:1/svc?timeout=500&sayHello.timeout=200&sayHello.retries=&retries=3" +
		"&flag=true&sayHello.flag=false&n=x&sayHello.weird=abc")
	tests := []struct {
		method, key string
		want        string
	}{
		{"sayHello", "timeout", "200"},          // method level beats service level
		{"sayBye", "timeout", "500"},            // other method falls back
		{"", "timeout", "500"},                  // no method
		{"sayHello", "retries", "3"},            // empty method-level value falls back
		{"sayHello", "missing", ""},             // neither set
		{"sayHello", "weird", "abc"},            // method level only
		{"sayBye", "weird", ""},                 // method level of another method is not seen
		{"sayHello.timeout", "", ""},            // not a key
		{"sayHello", "sayHello.timeout", "200"}, // full name works as a service-level key
	}
	for _, tc := range tests {
		if got := u.MethodParam(tc.method, tc.key); got != tc.want {
			t.Errorf("MethodParam(%q, %q) = %q, want %q", tc.method, tc.key, got, tc.want)
		}
	}

	ints := []struct {
		method, key string
		def, want   int64
	}{
		{"sayHello", "timeout", 9, 200},
		{"other", "timeout", 9, 500},
		{"sayHello", "missing", 9, 9},
		{"sayHello", "n", 9, 9},       // not a number
		{"sayHello", "weird", -1, -1}, // not a number, method level
	}
	for _, tc := range ints {
		if got := u.MethodParamInt(tc.method, tc.key, tc.def); got != tc.want {
			t.Errorf("MethodParamInt(%q, %q, %d) = %d, want %d", tc.method, tc.key, tc.def, got, tc.want)
		}
	}

	bools := []struct {
		method, key string
		def, want   bool
	}{
		{"sayHello", "flag", true, false},
		{"other", "flag", false, true},
		{"other", "missing", true, true},
		{"other", "missing", false, false},
		{"other", "n", true, true}, // not a bool
		{"other", "n", false, false},
	}
	for _, tc := range bools {
		if got := u.MethodParamBool(tc.method, tc.key, tc.def); got != tc.want {
			t.Errorf("MethodParamBool(%q, %q, %v) = %v, want %v", tc.method, tc.key, tc.def, got, tc.want)
		}
	}

	if got := u.MethodParamOr("sayHello", "missing", "d"); got != "d" {
		t.Errorf("MethodParamOr default = %q, want d", got)
	}
	if got := u.MethodParamOr("sayHello", "timeout", "d"); got != "200" {
		t.Errorf("MethodParamOr = %q, want 200", got)
	}
}

func TestMethodTimeout(t *testing.T) {
	u := kernel.MustParseURL("dubbo://h:1/svc?timeout=500&sayHello.timeout=200&zero.timeout=0&neg.timeout=-5")
	tests := []struct {
		method string
		wantMs int64
	}{
		{"sayHello", 200},
		{"other", 500},
		{"zero", 7},
		{"neg", 7},
	}
	for _, tc := range tests {
		got := u.MethodTimeout(tc.method, 7_000_000)
		if got.Milliseconds() != tc.wantMs {
			t.Errorf("MethodTimeout(%q) = %v, want %dms", tc.method, got, tc.wantMs)
		}
	}
}

func TestParamDefaults(t *testing.T) {
	u := kernel.MustParseURL("dubbo://h:1/svc?i=42&neg=-3&bad=4x&empty=&t=true&f=false&one=1&zero=0&word=yes")
	ints := []struct {
		key       string
		def, want int64
	}{
		{"i", 7, 42},
		{"neg", 7, -3},
		{"bad", 7, 7},
		{"empty", 7, 7},
		{"missing", 7, 7},
	}
	for _, tc := range ints {
		if got := u.ParamInt(tc.key, tc.def); got != tc.want {
			t.Errorf("ParamInt(%q, %d) = %d, want %d", tc.key, tc.def, got, tc.want)
		}
	}
	bools := []struct {
		key       string
		def, want bool
	}{
		{"t", false, true},
		{"f", true, false},
		{"one", false, true},
		{"zero", true, false},
		{"word", true, true}, // unparsable: default
		{"word", false, false},
		{"empty", true, true},
		{"missing", true, true},
		{"missing", false, false},
	}
	for _, tc := range bools {
		if got := u.ParamBool(tc.key, tc.def); got != tc.want {
			t.Errorf("ParamBool(%q, %v) = %v, want %v", tc.key, tc.def, got, tc.want)
		}
	}
	if got := u.ParamOr("empty", "d"); got != "d" {
		t.Errorf("ParamOr(empty) = %q, want d", got)
	}
	if got := u.ParamOr("i", "d"); got != "42" {
		t.Errorf("ParamOr(i) = %q, want 42", got)
	}
	if v, ok := u.Lookup("empty"); !ok || v != "" {
		t.Errorf("Lookup(empty) = %q, %v; want \"\", true", v, ok)
	}
	if v, ok := u.Lookup("missing"); ok || v != "" {
		t.Errorf("Lookup(missing) = %q, %v; want \"\", false", v, ok)
	}
}

func TestURLImmutability(t *testing.T) {
	const raw = "dubbo://h:1/svc?timeout=500&sayHello.timeout=200&group=g"
	orig := kernel.MustParseURL(raw)
	origStr := orig.String()
	origParams := orig.Params()

	tests := []struct {
		name   string
		derive func(*kernel.URL) *kernel.URL
		check  func(t *testing.T, d *kernel.URL)
	}{
		{
			name:   "WithParam adds",
			derive: func(u *kernel.URL) *kernel.URL { return u.WithParam("retries", "5") },
			check: func(t *testing.T, d *kernel.URL) {
				if d.Param("retries") != "5" {
					t.Errorf("derived retries = %q", d.Param("retries"))
				}
			},
		},
		{
			name:   "WithParam overrides method level",
			derive: func(u *kernel.URL) *kernel.URL { return u.WithParam("sayHello.timeout", "50") },
			check: func(t *testing.T, d *kernel.URL) {
				if got := d.MethodParam("sayHello", "timeout"); got != "50" {
					t.Errorf("derived MethodParam = %q, want 50", got)
				}
			},
		},
		{
			name: "WithParams adds a new method level key",
			derive: func(u *kernel.URL) *kernel.URL {
				return u.WithParams(map[string]string{"sayBye.timeout": "70", "x": ""})
			},
			check: func(t *testing.T, d *kernel.URL) {
				if got := d.MethodParam("sayBye", "timeout"); got != "70" {
					t.Errorf("derived MethodParam(sayBye) = %q, want 70", got)
				}
				if _, ok := d.Lookup("x"); !ok {
					t.Error("empty value not kept")
				}
			},
		},
		{
			name:   "WithoutParams removes method level",
			derive: func(u *kernel.URL) *kernel.URL { return u.WithoutParams("sayHello.timeout") },
			check: func(t *testing.T, d *kernel.URL) {
				if got := d.MethodParam("sayHello", "timeout"); got != "500" {
					t.Errorf("derived MethodParam = %q, want 500", got)
				}
			},
		},
		{
			name:   "WithoutParams removes group",
			derive: func(u *kernel.URL) *kernel.URL { return u.WithoutParams("group", "timeout") },
			check: func(t *testing.T, d *kernel.URL) {
				if d.ServiceKey() != "svc" {
					t.Errorf("derived ServiceKey = %q, want svc", d.ServiceKey())
				}
				if d.String() != "dubbo://h:1/svc?sayHello.timeout=200" {
					t.Errorf("derived String = %q", d.String())
				}
			},
		},
		{
			name:   "WithAddress",
			derive: func(u *kernel.URL) *kernel.URL { return u.WithAddress("tri", "10.0.0.2", 50051) },
			check: func(t *testing.T, d *kernel.URL) {
				if d.String() != "tri://10.0.0.2:50051/svc?group=g&sayHello.timeout=200&timeout=500" {
					t.Errorf("derived String = %q", d.String())
				}
				if d.MethodParam("sayHello", "timeout") != "200" || d.ServiceKey() != "g/svc" {
					t.Error("derived lost its params")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.derive(orig)
			if d == orig {
				t.Fatal("derived URL is the same pointer")
			}
			tc.check(t, d)
			// The original is unchanged, including its method index.
			if orig.String() != origStr {
				t.Errorf("original String changed: %q", orig.String())
			}
			if !maps.Equal(orig.Params(), origParams) {
				t.Errorf("original params changed: %v", orig.Params())
			}
			if got := orig.MethodParam("sayHello", "timeout"); got != "200" {
				t.Errorf("original MethodParam(sayHello) = %q, want 200", got)
			}
			if got := orig.MethodParam("sayBye", "timeout"); got != "500" {
				t.Errorf("original MethodParam(sayBye) = %q, want 500", got)
			}
			if orig.ServiceKey() != "g/svc" || orig.Protocol != "dubbo" || orig.Host != "h" || orig.Port != 1 {
				t.Errorf("original changed: %q %q", orig.ServiceKey(), orig.String())
			}
			if _, ok := orig.Lookup("retries"); ok {
				t.Error("original gained retries")
			}
		})
	}
}

func TestParamsReturnsCopy(t *testing.T) {
	u := kernel.MustParseURL("dubbo://h:1/svc?a=1")
	p := u.Params()
	p["a"] = "2"
	p["b"] = "3"
	if u.Param("a") != "1" || u.Param("b") != "" {
		t.Errorf("Params() is not a copy: a=%q b=%q", u.Param("a"), u.Param("b"))
	}
	seen := map[string]string{}
	u.WithParam("b", "2").RangeParams(func(k, v string) bool { seen[k] = v; return true })
	if !maps.Equal(seen, map[string]string{"a": "1", "b": "2"}) {
		t.Errorf("RangeParams saw %v", seen)
	}
	n := 0
	u.WithParam("b", "2").RangeParams(func(k, v string) bool { n++; return false })
	if n != 1 {
		t.Errorf("RangeParams did not stop: %d calls", n)
	}
}

func TestServiceKey(t *testing.T) {
	tests := []struct {
		raw  string
		want string
	}{
		{"dubbo://h:1/org.Greeter?group=g&version=1.0.0", "g/org.Greeter:1.0.0"},
		{"dubbo://h:1/org.Greeter?version=1.0.0", "org.Greeter:1.0.0"},
		{"dubbo://h:1/org.Greeter?group=g", "g/org.Greeter"},
		{"dubbo://h:1/org.Greeter", "org.Greeter"},
		{"dubbo://h:1/org.Greeter?group=&version=", "org.Greeter"},
		// The interface parameter beats the path.
		{"dubbo://h:1/path.Name?interface=org.Greeter&version=2", "org.Greeter:2"},
	}
	for _, tc := range tests {
		if got := kernel.MustParseURL(tc.raw).ServiceKey(); got != tc.want {
			t.Errorf("ServiceKey(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	fn := []struct {
		iface, group, version, want string
	}{
		{"org.Greeter", "g", "1.0", "g/org.Greeter:1.0"},
		{"org.Greeter", "", "1.0", "org.Greeter:1.0"},
		{"org.Greeter", "g", "", "g/org.Greeter"},
		{"org.Greeter", "", "", "org.Greeter"},
	}
	for _, tc := range fn {
		if got := kernel.ServiceKey(tc.iface, tc.group, tc.version); got != tc.want {
			t.Errorf("ServiceKey(%q, %q, %q) = %q, want %q", tc.iface, tc.group, tc.version, got, tc.want)
		}
	}
}

func TestIsTruthy(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"", false},
		{"false", false},
		{"FALSE", false},
		{"0", false},
		{"null", false},
		{"NULL", false},
		{"N/A", false},
		{"n/a", false},
		{"true", true},
		{"1", true},
		{"x", true},
		{"2", true},
		{"00", true},
		{" ", true},
	}
	for _, tc := range tests {
		if got := kernel.IsTruthy(tc.v); got != tc.want {
			t.Errorf("IsTruthy(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestURLLookupsDoNotAllocate(t *testing.T) {
	u := kernel.MustParseURL("dubbo://h:1/org.Greeter?group=g&version=1&timeout=500&sayHello.timeout=200")
	var sink string
	tests := []struct {
		name string
		f    func()
	}{
		{"Param", func() { sink = u.Param("timeout") }},
		{"Param missing", func() { sink = u.Param("nope") }},
		{"MethodParam method level", func() { sink = u.MethodParam("sayHello", "timeout") }},
		{"MethodParam fallback", func() { sink = u.MethodParam("sayBye", "timeout") }},
		{"ServiceKey", func() { sink = u.ServiceKey() }},
		{"String", func() { sink = u.String() }},
	}
	for _, tc := range tests {
		if n := testing.AllocsPerRun(100, tc.f); n != 0 {
			t.Errorf("%s allocates %v times per call, want 0", tc.name, n)
		}
	}
	_ = sink
}
