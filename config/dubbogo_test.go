package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func readDubboGo(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dubbogo", name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// dubbo-go-samples' configs, copied as they are, read in weft's keys.
func TestFromDubboGoSamples(t *testing.T) {
	for name, want := range map[string]map[string]any{
		"helloworld-client.yml": {
			"registries": map[string]any{"demoZK": map[string]any{"address": "zookeeper://127.0.0.1:2181?timeout=3000"}},
			"consumer": map[string]any{"references": map[string]any{
				"GreeterClientImpl": map[string]any{"protocol": "tri", "interface": "com.apache.dubbo.sample.basic.IGreeter"}}},
		},
		"helloworld-server.yml": {
			"registries": map[string]any{"demoZK": map[string]any{"address": "nacos://dubbogo-nacos:8848?timeout=3000"}},
			"protocols":  map[string]any{"triple": map[string]any{"name": "tri", "port": 20000}},
			"provider": map[string]any{"services": map[string]any{
				"GreeterProvider": map[string]any{"protocol": "triple", "interface": "com.apache.dubbo.sample.basic.IGreeter"}}},
		},
		"registry-zookeeper-client.yml": {
			"application": map[string]any{"register_mode": "interface"},
			"registries":  map[string]any{"demoZK": map[string]any{"address": "zookeeper://127.0.0.1:2181?group=myGroup&timeout=3000"}},
			"consumer": map[string]any{"references": map[string]any{
				"GreeterClientImpl": map[string]any{"protocol": "tri", "interface": "com.apache.dubbo.sample.basic.IGreeter"},
				"UserProviderWithCustomGroupAndVersion": map[string]any{"protocol": "tri", "interface": "com.apache.dubbo.sample.basic.IGreeter",
					"group": "myInterfaceGroup", "version": "myInterfaceVersion"}}},
		},
		"triple-hessian2-client.yml": {
			"registries": map[string]any{"demoZK": map[string]any{"address": "zookeeper://127.0.0.1:2181?timeout=3000"}},
			"consumer": map[string]any{"references": map[string]any{
				"ComplexProvider": map[string]any{"protocol": "tri", "serialization": "hessian2", "interface": "com.apache.dubbo.sample.basic.ComplexProvider"},
				"UserProvider":    map[string]any{"protocol": "tri", "serialization": "hessian2", "interface": "com.apache.dubbo.sample.basic.IGreeter"}}},
		},
		"config-yaml-client.yml": {
			"registries": map[string]any{"demoZK": map[string]any{"address": "zookeeper://127.0.0.1:2181?timeout=3000"}},
			"consumer": map[string]any{"references": map[string]any{
				"GreetServiceImpl": map[string]any{"protocol": "tri", "interface": "com.apache.dubbo.sample.Greeter", "retries": 3, "timeout": 3000}}},
		},
	} {
		got, ok, err := FromDubboGoDoc(readDubboGo(t, name))
		if !ok || err != nil {
			t.Errorf("%s: ok %v, err %v", name, ok, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", name, got, want)
		}
	}
}

// A registry's zone, weight and preferred are weft's keys.
func TestFromDubboGoRegistryZone(t *testing.T) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(`dubbo: {registries: {r: {protocol: zookeeper, address: "h:1", zone: hz, weight: 3, preferred: true}}}`), &m); err != nil {
		t.Fatal(err)
	}
	got, _, err := FromDubboGoDoc(m)
	r, _ := got["registries"].(map[string]any)["r"].(map[string]any)
	if err != nil || r["zone"] != "hz" || r["weight"] != 3 || r["preferred"] != true {
		t.Fatalf("%v %v", got, err)
	}
}

// What weft cannot honour is named, each key once, never dropped.
func TestFromDubboGoErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`dubbo: {registries: {r: {protocol: zookeeper, address: "h:1", simplified: true}}, tracing: {x: 1}}`:                                             "a dubbo-go config (dubbo: at the top): keys weft does not support: dubbo.tracing, dubbo.registries.r.simplified; remove them",
		`dubbo: {consumer: {request-timeout: soon}}`:                                                                                                     `dubbo.consumer.request-timeout: "soon" is not a duration (3s, 500ms) or a number of ms`,
		`dubbo: {registries: {a: {protocol: zookeeper, address: "h:1"}, b: {address: "nacos://h:2"}}, consumer: {registry-ids: [a]}}`:                    "dubbo.consumer.registry-ids: names 1 of the 2 registries",
		`dubbo: {registries: {a: {protocol: zookeeper, address: "h:1", registry-type: interface}, b: {address: "nacos://h:2", registry-type: service}}}`: `dubbo.registries.b.registry-type: "service" differs from another registry's`,
		`dubbo: {registries: {a: {address: "h:1"}}}`:                                                                                                     "dubbo.registries.a.protocol: missing: set zookeeper or nacos",
		`{dubbo: {registries: {}}, consumer: {timeout: 3}}`:                                                                                              "with weft's keys beside it (consumer)",
		`dubbo: {provider: {services: {s: {interface: x.S, methods: [{retries: 1}]}}}}`:                                                                  "dubbo.provider.services.s.methods[0]: a method without its name",
	} {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		_, _, err := FromDubboGoDoc(m)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got  %v\n want %s", doc, err, want)
		}
	}
	if _, ok, _ := FromDubboGoDoc(map[string]any{"consumer": map[string]any{}}); ok {
		t.Error("a weft config taken for a dubbo-go one")
	}
}

// Keys as dubbo-go reads them: case and dashes do not matter; durations.
func TestFromDubboGoKeysAndDurations(t *testing.T) {
	var m map[string]any
	yaml.Unmarshal([]byte(`dubbo:
  application: {name: app, organization: dubbo.io}
  consumer:
    requestTimeout: 1.5s
    check: false
    references:
      r: {interface: x.R, url: "tri://127.0.0.1:20000", timeout: 250ms, methods: [{name: sayHello, retries: 0, timeout: 2s}]}
`), &m)
	got, _, err := FromDubboGoDoc(m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"application": map[string]any{"name": "app"},
		"consumer": map[string]any{"timeout": 1500, "check": false, "references": map[string]any{"r": map[string]any{
			"interface": "x.R", "url": "tri://127.0.0.1:20000", "timeout": 250,
			"methods": map[string]any{"sayHello": map[string]any{"retries": 0, "timeout": 2000}}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got  %v\n want %v", got, want)
	}
}

// dubbo-go's generic: "true" is weft's generic reference; its other forms
// are named as keys weft does not support.
func TestFromDubboGoGeneric(t *testing.T) {
	got, err := FromDubboGo(map[string]any{"consumer": map[string]any{"references": map[string]any{
		"r": map[string]any{"interface": "a.B", "generic": "true"}}}})
	if err != nil {
		t.Fatal(err)
	}
	refs := got["consumer"].(map[string]any)["references"].(map[string]any)
	if refs["r"].(map[string]any)["generic"] != true {
		t.Fatalf("generic: %v", refs["r"])
	}
	_, err = FromDubboGo(map[string]any{"consumer": map[string]any{"references": map[string]any{
		"r": map[string]any{"interface": "a.B", "generic": "gson"}}}})
	if err == nil || !strings.Contains(err.Error(), "generic") {
		t.Fatalf("generic: gson: %v, want it named as unsupported", err)
	}
}
