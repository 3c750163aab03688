package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// wasmGreeter builds the greeter service example of sdk/<sdk> into a
// temporary directory.
func wasmGreeter(t *testing.T, sdk string) string {
	t.Helper()
	out := t.TempDir()
	args := []string{filepath.Join("..", "..", "sdk", sdk, "build.sh"), out}
	if sdk == "go" {
		args = append(args, "greeter")
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "RUSTC=/usr/bin/rustc")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if os.Getenv("CI") == "" && sdk == "rust" {
			t.Skipf("the Rust SDK does not build here (apt-get install rustc libstd-rust-dev-wasm32 lld): %v\n%s", err, stderr.String())
		}
		t.Fatalf("sdk/%s/build.sh: %v\n%s", sdk, err, stderr.String())
	}
	return filepath.Join(out, "greeter.wasm")
}

// Services implemented in WASM (the Go and Rust SDKs' greeter), served by
// the weft command (`weft run`) from a folder holding only a YAML file, an
// IDL and the module, answer the peers as a Go provider would: dubbo-go
// 3.3.1 over dubbo (hessian2) and over Triple (protobuf, the IDL
// weftbench.echo.EchoService declared by its .proto file), and a Java
// consumer, plain and with Java's generic $invoke.
func TestPeersCallWasmServices(t *testing.T) {
	triBin := buildDubbogoTri(t)
	peer := javaPeer(t)
	cli := buildWeftCLI(t)
	proto, err := os.ReadFile(filepath.Join("..", "..", "apps", "examples", "echo", "echopb", "echo.proto"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sdk := range []string{"rust", "go"} {
		t.Run(sdk, func(t *testing.T) {
			// The folder a user deploys: YAML, IDL, module; paths
			// relative to the YAML.
			dir := t.TempDir()
			mod, err := os.ReadFile(wasmGreeter(t, sdk))
			if err != nil {
				t.Fatal(err)
			}
			addr, port := freeAddr(t)
			triAddr, triPort := freeAddr(t)
			for name, b := range map[string][]byte{"echo.proto": proto, "greeter.wasm": mod, "service.yaml": []byte(fmt.Sprintf(`
application: {name: wasm-%s}
qos: {enable: false}
protocols: {dubbo: {port: %d}, tri: {port: %d}}
provider:
  services:
    echo:
      interface: %s
      protocol: dubbo
      impl: {wasm: greeter.wasm}
      methods: {echo: {params: [java.lang.String], returns: java.lang.String}}
    idl:
      idl: echo.proto
      protocol: tri
      impl: {wasm: greeter.wasm}
`, sdk, port, triPort, dubbogo.Interface))} {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			weftRun(t, cli, filepath.Join(dir, "service.yaml"), addr, triAddr)

			c, err := dubbogo.NewClient("dubbo://" + addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			big := strings.Repeat("é", 32<<10) // 64 KiB of UTF-8
			for _, s := range []string{"hello", big} {
				if got, err := c.Echo(ctx, s); err != nil || got != s {
					t.Fatalf("dubbo-go over dubbo: echo of %d bytes: %d bytes back, %v", len(s), len(got), err)
				}
			}
			got, resp, err := c.EchoWithAttachments(ctx, "x", map[string]any{"x-req": "42"})
			if err != nil || got != "x" || resp["x-resp"] != "resp-42" {
				t.Fatalf("dubbo-go over dubbo, attachments: %q %v %v", got, resp, err)
			}

			r := runDubbogoTriCall(t, triBin, triAddr, "idl", "wasm ☺")
			if r.Echo != "wasm ☺" {
				t.Errorf("dubbo-go over Triple: Echo %q", r.Echo)
			}
			if r.EchoAttachments["x-resp"] != "resp-42" {
				t.Errorf("dubbo-go over Triple: reply attachments %v, want x-resp: resp-42", r.EchoAttachments)
			}
			if !strings.Contains(r.FailError, "fail: idl") {
				t.Errorf(`dubbo-go over Triple: Echo("fail"): %q, want the module's business error`, r.FailError)
			}

			java := runJavaConsumer(t, peer, addr)
			for _, name := range []string{"echo", "$invoke echo"} {
				if java[name] != javaConsumerWants[name] {
					t.Errorf("Java %s: %s, want %s", name, java[name], javaConsumerWants[name])
				}
			}
		})
	}
}

// A bridge from config alone puts a Triple face on dubbo-go 3.3.1's dubbo
// provider: curl's JSON and grpcurl (grpc-go) call it through a weft App
// that forwards each call, and get the provider's results, its POJO, its
// business error and its reply attachments.
// weftRun runs `weft run -c config` until the test ends, once addrs
// answer.
func weftRun(t *testing.T, cli, config string, addrs ...string) {
	t.Helper()
	cmd := exec.Command(cli, "run", "-c", config)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("weft run exited: %v\n%s", err, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("weft run: %s does not answer after 30 s\n%s", a, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestBridgeToDubboGoProvider(t *testing.T) {
	grpcurl := buildTool(t, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	addr, _ := freeAddr(t)
	stop, err := dubbogo.StartProvider(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	protoFile, err := filepath.Abs(filepath.Join("..", "..", "apps", "examples", "echo", "echopb", "echo.proto"))
	if err != nil {
		t.Fatal(err)
	}
	triAddr, triPort := freeAddr(t)
	startWeft(t, weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
consumer:
  references:
    up: {interface: %s, url: "dubbo://%s", timeout: 5000, retries: 0}
provider:
  services:
    table:
      interface: %s
      impl: {forward: up}
      methods:
        echo: {params: [java.lang.String], returns: java.lang.String}
        getUser: {params: [long], returns: org.weft.bench.User}
        fail: {params: [java.lang.String]}
    idl:
      idl: %s
      impl: {forward: up}
      methods: {Echo: {params: [java.lang.String]}}
`, triPort, dubbogo.Interface, addr, dubbogo.Interface, protoFile))))

	base := "http://" + triAddr + "/" + dubbogo.Interface + "/"
	post := func(method, body string) (int, string) {
		t.Helper()
		out, err := exec.Command("curl", "-s", "-w", "\n%{http_code}", "-H", "content-type: application/json", "-d", body, base+method).Output()
		if err != nil {
			t.Fatalf("curl %s: %v", method, err)
		}
		s := strings.TrimSpace(string(out))
		i := strings.LastIndexByte(s, '\n')
		var code int
		fmt.Sscan(s[i+1:], &code)
		return code, s[:max(i, 0)]
	}
	if code, body := post("echo", `["through the bridge"]`); code != 200 || body != `"through the bridge"` {
		t.Fatalf("curl echo: %d %s", code, body)
	}
	if code, body := post("getUser", `[7]`); code != 200 || !strings.Contains(body, `"name":"user-7"`) || !strings.Contains(body, `"id":7`) {
		t.Fatalf("curl getUser: %d %s", code, body)
	}
	if code, body := post("fail", `["boom"]`); code == 200 || !strings.Contains(body, "boom") {
		t.Fatalf("curl fail: %d %s, want dubbo-go's business error", code, body)
	}
	out, err := exec.Command(grpcurl, "-plaintext", "-max-time", "20", "-v", "-H", "x-req: 42", "-d", `{"msg":"grpc-go"}`,
		triAddr, "weftbench.echo.EchoService/Echo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"msg": "grpc-go"`) || !strings.Contains(string(out), "x-resp: resp-42") {
		t.Fatalf("grpcurl Echo through the bridge: %v\n%s", err, out)
	}
}
