package interop_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// zkAddr returns ZOOKEEPER_TEST_ADDR; without it the test fails under CI
// and is skipped elsewhere.
func zkAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ZOOKEEPER_TEST_ADDR")
	if addr == "" {
		msg := "ZOOKEEPER_TEST_ADDR is not set: start ZooKeeper with `test/zookeeper/zk.sh start /tmp/zk` and set ZOOKEEPER_TEST_ADDR=127.0.0.1:2181"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return addr
}

// zkChildren waits until path has want children and returns them.
func zkChildren(t *testing.T, c *zk.Conn, path string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		children, _, err := c.Children(path)
		if err == nil && len(children) == want {
			return children
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of %s: %v, %v; want %d", path, children, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// ZooKeeper between weft and dubbo-go 3.3.1 (interface-level registration,
// dubbo-go's registry/zookeeper), both ways: a weft consumer finds and
// calls a dubbo-go provider registered in ZooKeeper, a dubbo-go consumer
// finds and calls a weft provider; and the node each writes for the same
// service has the same path, segment for segment, in the same encoding
// (their URL parameters differ).
func TestZookeeperWithDubboGo(t *testing.T) {
	addr := zkAddr(t)
	bin := buildDubbogoEcho(t)
	ctx := context.Background()
	raw, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Each side in a root of its own, so each finds only the other.
	goRoot := fmt.Sprintf("weft-interop-go-%d", time.Now().UnixNano())
	weftRoot := fmt.Sprintf("weft-interop-weft-%d", time.Now().UnixNano())
	plugin := weft.WithPlugins(zookeeper.Plugin())

	// dubbo-go provider -> ZooKeeper -> weft consumer.
	goAddr, goPort := freeAddr(t)
	startDubbogoProvider(t, bin, goAddr, "-zk", "zookeeper://"+addr+"?group="+goRoot)
	goDir := "/" + goRoot + "/" + dubbogo.Interface + "/providers"
	goNode := zkChildren(t, raw, goDir, 1)[0]
	t.Logf("dubbo-go wrote %s/%s", goDir, goNode)

	var c echoClient
	startWeft(t, plugin, weft.WithReference("echo", &c), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {zk: {address: "zookeeper://%s?group=%s"}}
consumer:
  references:
    echo: {interface: %s, timeout: 5000, retries: 0}
`, addr, goRoot, dubbogo.Interface))))
	if got, err := c.Echo(ctx, "via zookeeper"); err != nil || got != "via zookeeper" {
		t.Fatalf("weft -> dubbo-go through ZooKeeper: %q, %v", got, err)
	}
	if u, err := c.GetUser(ctx, 3); err != nil || u.ID != 3 {
		t.Fatalf("getUser: %+v, %v", u, err)
	}

	// weft provider -> ZooKeeper -> dubbo-go consumer.
	svc := &weftEcho{}
	_, weftPort := freeAddr(t)
	startWeft(t, plugin, weft.WithService("echo", svc), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {zk: {address: "zookeeper://%s?group=%s"}}
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, addr, weftRoot, weftPort, dubbogo.Interface))))
	weftDir := "/" + weftRoot + "/" + dubbogo.Interface + "/providers"
	weftNode := zkChildren(t, raw, weftDir, 1)[0]
	t.Logf("weft wrote %s/%s", weftDir, weftNode)
	got, err := dubbogoCall(t, bin, "127.0.0.1:1", "from dubbo-go", "-zk", "zookeeper://"+addr+"?group="+weftRoot)
	if err != nil || got != "from dubbo-go" {
		t.Fatalf("dubbo-go -> weft through ZooKeeper: %q, %v", got, err)
	}
	if svc.echoes.Load() != 1 {
		t.Fatalf("the weft provider served %d echoes, want 1", svc.echoes.Load())
	}

	// The layout: /<root>/<interface>/providers/<node>, the interface
	// segment the same, the node the URL-encoded full URL of the same
	// form (protocol://host:port/interface?params) in the same encoding.
	goPath := strings.Split(strings.TrimPrefix(goDir+"/"+goNode, "/"), "/")
	weftPath := strings.Split(strings.TrimPrefix(weftDir+"/"+weftNode, "/"), "/")
	if len(goPath) != 4 || len(weftPath) != 4 {
		t.Fatalf("segments: dubbo-go %d, weft %d, want 4 each", len(goPath), len(weftPath))
	}
	if goPath[1] != weftPath[1] || goPath[2] != weftPath[2] {
		t.Errorf("interface and category segments differ: dubbo-go %s/%s, weft %s/%s", goPath[1], goPath[2], weftPath[1], weftPath[2])
	}
	prefix := func(port int) string {
		return zookeeper.Encode(fmt.Sprintf("dubbo://127.0.0.1:%d/%s?", port, dubbogo.Interface))
	}
	if !strings.HasPrefix(goNode, prefix(goPort)) {
		t.Errorf("dubbo-go's node does not start with %s", prefix(goPort))
	}
	if !strings.HasPrefix(weftNode, prefix(weftPort)) {
		t.Errorf("weft's node does not start with %s", prefix(weftPort))
	}
	for who, node := range map[string]string{"dubbo-go": goNode, "weft": weftNode} {
		dec, err := url.QueryUnescape(node)
		if err != nil {
			t.Fatalf("%s's node does not decode: %v", who, err)
		}
		// One layer of escaping, Java's form: encoding the decoded
		// string again gives the node back.
		if again := zookeeper.Encode(dec); again != node {
			t.Errorf("%s's node is not Java's encoding of %s:\n got %s\nwant %s", who, dec, node, again)
		}
		u, err := zookeeper.ParseNode(node)
		if err != nil || u.Interface() != dubbogo.Interface || u.Param("methods") == "" {
			t.Errorf("%s's node read back as %v, %v", who, u, err)
		}
		// Same parameter form: raw values inside the one escaping
		// (methods=a,b, not a%2Cb).
		if strings.Contains(dec, "%2C") {
			t.Errorf("%s's node escapes its parameters twice: %s", who, dec)
		}
	}
	// What weft's NodePath gives for dubbo-go's URL is dubbo-go's node,
	// up to the parameter order, which Dubbo does not fix.
	gu, _ := zookeeper.ParseNode(goNode)
	p, err := zookeeper.NodePath("/"+goRoot, gu)
	if err != nil || !strings.HasPrefix(p, goDir+"/"+prefix(goPort)) {
		t.Errorf("NodePath of dubbo-go's URL: %s, %v", p, err)
	}
}
