package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// buildWeftCLI builds the weft command (apps/weft) against its own go.mod,
// so that the tests run `weft invoke` as a user does.
func buildWeftCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weft")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "apps", "weft")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build apps/weft: %v\n%s", err, out)
	}
	return bin
}

// weftInvoke runs `weft invoke URL METHOD ARGS` and returns its stdout (the
// result as JSON).
func weftInvoke(t *testing.T, cli, url, method, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "invoke", "-timeout", "5s", url, method, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("weft invoke %s %s %s: %v: %s", url, method, args, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// The POJO argument of the generic calls below, as `weft invoke` takes it:
// a JSON object with the Java class under "class".
const userJSON = `{"class":"org.weft.bench.User","id":5,"name":"ann","tags":["p","q"],"score":2.5}`

// weft's generic calls to a dubbo-go 3.3.1 provider (in its own process),
// through `weft invoke` and through the generic client, the same
// proxy.GenericInvocation. dubbo-go's generic_service filter takes
// $invoke's arguments as []hessian.Object only: weft sent an untyped list,
// the filter panicked, and the call timed out after 3 s with no answer.
// Now the arguments go as Java's Object[] ("[object" list).
func TestWeftGenericInvokeToDubboGoProvider(t *testing.T) {
	bin := buildDubbogoEcho(t)
	cli := buildWeftCLI(t)
	addr, _ := freeAddr(t)
	startDubbogoProvider(t, bin, addr)
	url := "dubbo://" + addr + "/" + dubbogo.Interface

	out, err := weftInvoke(t, cli, url, "echo", `["x"]`)
	if err != nil || strings.TrimSpace(out) != `"x"` {
		t.Fatalf("weft invoke echo [\"x\"]: %q %v", out, err)
	}

	// A typed POJO: a map with "class", realized by dubbo-go into its User.
	out, err = weftInvoke(t, cli, url, "echoUser", "["+userJSON+"]")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("weft invoke echoUser printed %q: %v", out, err)
	}
	// dubbo-go's generalizer names the fields after the Go ones with the
	// first letter lowered (ID is "iD"), not after their hessian tags.
	if got["class"] != dubbogo.UserClass || got["name"] != "ann!" || got["score"] != 2.5 ||
		!reflect.DeepEqual(got["tags"], []any{"p", "q"}) || got["iD"] != 5.0 {
		t.Fatalf("weft invoke echoUser: %s", out)
	}

	// The generic client, in this process.
	app := startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "%s", timeout: 5000, retries: 0}
`, dubbogo.Interface, "dubbo://"+addr))))
	g := proxy.NewGenericClient(func() (kernel.Invoker, error) { return app.Reference("echo") })
	ctx := context.Background()
	if v, err := g.GenericInvoke(ctx, "echo", []string{"java.lang.String"}, []any{"y"}); err != nil || v != "y" {
		t.Fatalf("generic echo: %#v %v", v, err)
	}
	v, err := g.GenericInvoke(ctx, "echoUser", []string{dubbogo.UserClass},
		[]any{map[string]any{"class": dubbogo.UserClass, "id": int64(6), "name": "bo", "tags": []any{"r"}, "score": 1.5}})
	m, ok := v.(map[any]any)
	if err != nil || !ok || m["class"] != dubbogo.UserClass || m["iD"] != int64(6) || m["name"] != "bo!" ||
		!reflect.DeepEqual(m["tags"], []any{"r"}) || m["score"] != 1.5 {
		t.Fatalf("generic echoUser: %#v %v", v, err)
	}
	if v, err := g.GenericInvoke(ctx, "getUser", []string{"long"}, []any{int64(9)}); err != nil || v.(map[any]any)["name"] != "user-9" {
		t.Fatalf("generic getUser: %#v %v", v, err)
	}
}
