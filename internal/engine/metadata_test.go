package engine

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/registry"
)

// The MetadataService's answer is written with the class definitions Java
// and dubbo-go 3.3.1 use (org.apache.dubbo.metadata.MetadataInfo: app,
// revision, tag, services; its ServiceInfo: name ... params), in their
// order, and reads back whole. The order matters to a peer that keeps one
// definition per class name (dubbo-go-hessian2 in a process that links
// dubbo-go writes and reads by position). test/interop's application-level
// tests call dubbo-go's MetadataService and answer it.
func TestMetadataInfoHessianIsDubboGos(t *testing.T) {
	registerMetadataTypes()
	md := &registry.MetadataInfo{App: "a", Revision: "r1", Tag: "gray", Services: map[string]*registry.ServiceInfo{
		"org.weft.E:dubbo": {Name: "org.weft.E", Group: "g", Version: "1", Protocol: "dubbo", Port: 20880, Path: "org.weft.E",
			Params: map[string]string{"methods": "echo"}},
	}}
	var ser hessian2.Serialization
	b, err := ser.Marshal(nil, md)
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{"\x03app\x08revision\x03tag\x08services", "\x04name\x05group\x07version\x08protocol\x04port\x04path\x06params"} {
		if !bytes.Contains(b, []byte(def)) {
			t.Errorf("the encoding lacks the field list %q: %q", def, b)
		}
	}
	got, err := ser.NewDecoder(b).Decode()
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := got.(*registry.MetadataInfo); !ok || !reflect.DeepEqual(g, md) {
		t.Fatalf("read back %#v, want %#v", got, md)
	}
}
