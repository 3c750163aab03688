package registry_test

import (
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"

	"github.com/weftrpc/weft/registry"
)

// goMetadataInfo and goServiceInfo have the layout of dubbo-go 3.3.1's
// metadata/info MetadataInfo and ServiceInfo, under the same Java classes.
type goMetadataInfo struct {
	App      string `hessian:"app"`
	Revision string `hessian:"revision"`
	Tag      string
	Services map[string]*goServiceInfo `hessian:"services"`
}

func (*goMetadataInfo) JavaClassName() string { return "org.apache.dubbo.metadata.MetadataInfo" }

type goServiceInfo struct {
	Name     string            `hessian:"name"`
	Group    string            `hessian:"group"`
	Version  string            `hessian:"version"`
	Protocol string            `hessian:"protocol"`
	Port     int               `hessian:"port"`
	Path     string            `hessian:"path"`
	Params   map[string]string `hessian:"params"`
}

func (*goServiceInfo) JavaClassName() string {
	return "org.apache.dubbo.metadata.MetadataInfo$ServiceInfo"
}

// A process that links dubbo-go beside weft (a gateway, the interop tests)
// has dubbo-go's MetadataInfo registered under the Java class first; the
// hessian library then keeps that class's field list and writes weft's
// values by position into it. weft's MetadataInfo must have dubbo-go's (and
// Java's) fields in dubbo-go's order, tag included, or dubbo-go reads the
// services map into tag (and fails the whole answer).
func TestMetadataInfoLayoutMatchesDubboGo(t *testing.T) {
	hessian.RegisterPOJO(&goMetadataInfo{})
	hessian.RegisterPOJO(&goServiceInfo{})
	hessian.RegisterPOJO(&registry.MetadataInfo{})
	hessian.RegisterPOJO(&registry.ServiceInfo{})
	md := &registry.MetadataInfo{App: "a", Revision: "r1", Services: map[string]*registry.ServiceInfo{
		"org.x.S:dubbo": {Name: "org.x.S", Protocol: "dubbo", Port: 20880, Path: "org.x.S", Params: map[string]string{"k": "v"}},
	}}
	enc := hessian.NewEncoder()
	if err := enc.Encode(md); err != nil {
		t.Fatal(err)
	}
	v, err := hessian.NewDecoder(enc.Buffer()).Decode()
	if err != nil {
		t.Fatalf("dubbo-go's decoder: %v", err)
	}
	got, ok := v.(*goMetadataInfo)
	if !ok {
		t.Fatalf("decoded %T, want dubbo-go's MetadataInfo", v)
	}
	s := got.Services["org.x.S:dubbo"]
	if got.App != "a" || got.Revision != "r1" || got.Tag != "" || s == nil || s.Name != "org.x.S" || s.Port != 20880 || s.Params["k"] != "v" {
		t.Fatalf("dubbo-go read %+v (service %+v)", got, s)
	}
}
