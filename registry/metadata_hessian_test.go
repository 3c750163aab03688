package registry

import (
	"bytes"
	"reflect"
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// goMetadataInfo and goServiceInfo have dubbo-go 3.3.1's shape
// (metadata/info): what a process that links dubbo-go registers under the
// same Java class names.
type goMetadataInfo struct {
	App      string                    `hessian:"app"`
	Revision string                    `hessian:"revision"`
	Tag      string                    // no tag: hessian's name is "tag"
	Services map[string]*goServiceInfo `hessian:"services"`
	urls     map[string][]string       `hessian:"-"`
}

func (*goMetadataInfo) JavaClassName() string { return "org.apache.dubbo.metadata.MetadataInfo" }

type goServiceInfo struct {
	Name       string            `hessian:"name"`
	Group      string            `hessian:"group"`
	Version    string            `hessian:"version"`
	Protocol   string            `hessian:"protocol"`
	Port       int               `hessian:"port"`
	Path       string            `hessian:"path"`
	Params     map[string]string `hessian:"params"`
	ServiceKey string            `hessian:"-"`
}

func (*goServiceInfo) JavaClassName() string {
	return "org.apache.dubbo.metadata.MetadataInfo$ServiceInfo"
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	e := hessian.NewEncoder()
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return e.Buffer()
}

// weft's MetadataInfo is written with dubbo-go's class definition (app,
// revision, tag, services; name ... params) and reads back whole, also
// once dubbo-go's types are registered under the same Java names (a
// process linking both, as the interop tests do: there the library writes
// weft's values under whichever definition it has, so the fields must be
// the same, in the same order).
func TestMetadataInfoHessianIsDubboGos(t *testing.T) {
	md := &MetadataInfo{App: "a", Revision: "r1", Tag: "gray", Services: map[string]*ServiceInfo{
		"org.weft.E:dubbo": {Name: "org.weft.E", Group: "g", Version: "1", Protocol: "dubbo", Port: 20880, Path: "org.weft.E",
			Params: map[string]string{"methods": "echo"}},
	}}
	hessian.RegisterPOJO(&MetadataInfo{})
	hessian.RegisterPOJO(&ServiceInfo{})
	for _, step := range []string{"weft's types", "dubbo-go's types registered too"} {
		b := encode(t, md)
		for _, def := range []string{"\x03app\x08revision\x03tag\x08services", "\x04name\x05group\x07version\x08protocol\x04port\x04path\x06params"} {
			if !bytes.Contains(b, []byte(def)) {
				t.Errorf("%s: the encoding lacks the field list %q: %q", step, def, b)
			}
		}
		got, err := hessian.NewDecoder(b).Decode()
		if err != nil {
			t.Fatalf("%s: decode: %v", step, err)
		}
		switch g := got.(type) {
		case *MetadataInfo:
			if !reflect.DeepEqual(g, md) {
				t.Errorf("%s: read back %+v, want %+v", step, g, md)
			}
		case *goMetadataInfo:
			s := g.Services["org.weft.E:dubbo"]
			if g.App != "a" || g.Revision != "r1" || g.Tag != "gray" || s == nil || s.Port != 20880 || s.Params["methods"] != "echo" {
				t.Errorf("%s: dubbo-go's type read back %+v (%+v)", step, g, s)
			}
		default:
			t.Fatalf("%s: decoded a %T", step, got)
		}
		hessian.RegisterPOJO(&goMetadataInfo{})
		hessian.RegisterPOJO(&goServiceInfo{})
	}
}
