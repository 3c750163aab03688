package zookeeper

import (
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// The outputs are Java 17's java.net.URLEncoder.encode(s, "UTF-8"), run on
// these inputs (what Dubbo's URL.encode calls).
func TestEncodeIsJavas(t *testing.T) {
	for in, want := range map[string]string{
		"dubbo://127.0.0.1:20880/org.weft.zk.Greeter?application=my app~1*&interface=org.weft.zk.Greeter&methods=a,b&owner=José&side=provider": "dubbo%3A%2F%2F127.0.0.1%3A20880%2Forg.weft.zk.Greeter%3Fapplication%3Dmy+app%7E1*%26interface%3Dorg.weft.zk.Greeter%26methods%3Da%2Cb%26owner%3DJos%C3%A9%26side%3Dprovider",
		"org.weft.zk.Greeter$Inner": "org.weft.zk.Greeter%24Inner",
		"~!*()'_.-":                 "%7E%21*%28%29%27_.-",
	} {
		if got := Encode(in); got != want {
			t.Errorf("Encode(%q)\n got %s\nwant %s", in, got, want)
		}
	}
}

func TestNodePath(t *testing.T) {
	u := kernel.MustParseURL("dubbo://127.0.0.1:20880/org.weft.zk.Greeter?application=my%20app~1*&interface=org.weft.zk.Greeter&methods=a,b&owner=Jos%C3%A9&side=provider")
	got, err := NodePath("/dubbo", u)
	if err != nil {
		t.Fatal(err)
	}
	want := "/dubbo/org.weft.zk.Greeter/providers/dubbo%3A%2F%2F127.0.0.1%3A20880%2Forg.weft.zk.Greeter%3Fapplication%3Dmy+app%7E1*%26interface%3Dorg.weft.zk.Greeter%26methods%3Da%2Cb%26owner%3DJos%C3%A9%26side%3Dprovider"
	if got != want {
		t.Fatalf("NodePath\n got %s\nwant %s", got, want)
	}
	// Read back: the same URL, parameters not decoded twice.
	back, err := ParseNode(strings.TrimPrefix(got, "/dubbo/org.weft.zk.Greeter/providers/"))
	if err != nil || back.String() != u.String() {
		t.Fatalf("ParseNode: %v, %v\nwant %s", back, err, u)
	}
	for raw, want := range map[string]string{
		"consumer://10.0.0.1/a.B?interface=a.B&side=consumer": "/dubbo/a.B/consumers/",
		"dubbo://10.0.0.1:1/a.B?category=consumers":           "/dubbo/a.B/consumers/",
		"dubbo://10.0.0.1:1/x?interface=a.B$C":                "/dubbo/a.B%24C/providers/",
	} {
		p, err := NodePath("/dubbo", kernel.MustParseURL(raw))
		if err != nil || !strings.HasPrefix(p, want) {
			t.Errorf("NodePath(%s) = %s, %v; want prefix %s", raw, p, err, want)
		}
	}
	// What the layout cannot carry is refused, not written wrong.
	if _, err := NodePath("/dubbo", kernel.MustParseURL("dubbo://h:1/a.B?x=a%26b")); err == nil {
		t.Error("a value with & was accepted")
	}
	for raw, want := range map[string]string{
		"zookeeper://h:2181":                "/dubbo",
		"zookeeper://h:2181?group=weft":     "/weft",
		"zookeeper://h:2181?group=/a/b":     "/a/b",
		"zookeeper://h:2181?group=weft-x/":  "/weft-x",
		"zookeeper://h:2181?backup=h2:2182": "/dubbo",
	} {
		if got := rootPath(kernel.MustParseURL(raw)); got != want {
			t.Errorf("rootPath(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestParseNodeRejects(t *testing.T) {
	for name, why := range map[string]string{
		"garbage":                          "not an encoded URL",
		"dubbo%3A%2F%2Fh%3A1%2Fa%ZZ":       "invalid URL escape",
		"dubbo%3A%2F%2Fh%3Axx%2Fa.B":       "bad port",
		strings.Repeat("%3A%2F%2F", 1<<14): "over the",
	} {
		_, err := ParseNode(name)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseNode(%.40q): %v, want an error with %q", name, err, why)
		}
		if err != nil && len(err.Error()) > 600 {
			t.Errorf("the error echoes %d bytes of the name", len(err.Error()))
		}
	}
}

func TestServers(t *testing.T) {
	got, err := servers(kernel.MustParseURL("zookeeper://10.0.0.1?backup=10.0.0.2:2182,10.0.0.3"))
	if err != nil || strings.Join(got, ",") != "10.0.0.1:2181,10.0.0.2:2182,10.0.0.3:2181" {
		t.Fatalf("servers: %v, %v", got, err)
	}
	if _, err := servers(kernel.MustParseURL("zookeeper://10.0.0.1?backup=10.0.0.2:x")); err == nil {
		t.Fatal("a bad backup port was accepted")
	}
}

// Dubbo's UrlUtils.isMatch: group and version must match, * matches any,
// a comma list of groups matches each, a disabled provider is left out.
func TestIsMatch(t *testing.T) {
	p := func(q string) *kernel.URL { return kernel.MustParseURL("dubbo://h:1/a.B?interface=a.B&" + q) }
	s := func(q string) *kernel.URL { return kernel.MustParseURL("consumer://h/a.B?interface=a.B&" + q) }
	cases := []struct {
		sub, prov string
		want      bool
	}{
		{"group=g1&version=1.0", "group=g1&version=1.0", true},
		{"group=g1&version=1.0", "group=g2&version=1.0", false},
		{"group=g1&version=1.0", "group=g1&version=2.0", false},
		{"version=1.0", "group=g1&version=1.0", false},
		{"group=g1", "group=g1&version=1.0", false},
		{"group=*&version=*", "group=g9&version=9", true},
		{"group=g1,g2&version=1.0", "group=g2&version=1.0", true},
		{"group=g1&version=1.0", "group=g1&version=1.0&enabled=false", false},
		{"group=g1&version=1.0&enabled=*", "group=g1&version=1.0&enabled=false", true},
		{"group=g1&version=1.0&classifier=x", "group=g1&version=1.0&classifier=y", false},
		{"x=1", "x=2", true},
		{"x=1", "category=routers", false},
	}
	for _, c := range cases {
		if got := isMatch(s(c.sub), p(c.prov)); got != c.want {
			t.Errorf("isMatch(%s, %s) = %v, want %v", c.sub, c.prov, got, c.want)
		}
	}
	if isMatch(s(""), kernel.MustParseURL("empty://0.0.0.0/a.B?interface=a.B")) {
		t.Error("an empty:// URL matched")
	}
}
