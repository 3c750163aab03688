package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/quickstart/greeter"
)

// weft ls on an embedded registry that a running App registered in: the
// service with its provider's address and parameters, as text and JSON;
// an unknown scheme names the known ones.
func TestLsEmbedded(t *testing.T) {
	dir := t.TempDir()
	startApp(t, fmt.Sprintf(`
application: {name: ls-test}
registries: {r: {address: "embedded://%s"}}
protocols: {dubbo: {port: 0}}
provider: {services: {greeter: {interface: org.weft.Greeter, version: "1.0"}}}
`, dir), weft.WithService("greeter", greeter.Greeter{}))

	var out, errb bytes.Buffer
	if code := cli([]string{"ls", "embedded://" + dir}, &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	re := regexp.MustCompile(`(?m)^org\.weft\.Greeter:1\.0  \(1 providers\)\n  dubbo://127\.0\.0\.1:[1-9][0-9]*  application=ls-test  version=1\.0  methods=sayHello$`)
	if !re.MatchString(out.String()) {
		t.Fatalf("weft ls printed:\n%s", out.String())
	}

	out.Reset()
	if code := cli([]string{"ls", "-json", "embedded://" + dir}, &out, &errb); code != 0 {
		t.Fatalf("-json: code %d: %s", code, errb.String())
	}
	var m map[string][]string
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || len(m["org.weft.Greeter:1.0"]) != 1 || !strings.HasPrefix(m["org.weft.Greeter:1.0"][0], "dubbo://127.0.0.1:") {
		t.Fatalf("-json: %v %s", err, out.String())
	}

	errb.Reset()
	if code := cli([]string{"ls", "etcd://127.0.0.1:2379"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown registry "etcd" (known: embedded, nacos, zookeeper)`) {
		t.Fatalf("unknown scheme: code %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := cli([]string{"ls", "-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "usage: weft ls") {
		t.Fatalf("-h: code %d, %s", code, errb.String())
	}
}
