package interop_test

// Interop with a Java peer: java/DubboPeer.java speaks the Dubbo protocol with
// Caucho Hessian 4.0.38 (Debian's libhessian-java), as consumer and as
// provider of org.weft.bench.EchoService, generic calls included. It is no
// Dubbo (the test machine has none), but it writes and reads each frame as
// Dubbo's ExchangeCodec and DubboCodec lay it out, with the Hessian that Java
// peers use, and it serves $invoke as Java's GenericFilter does.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// hessianJar is Caucho Hessian's jar as Debian installs it; HESSIAN_JAR
// overrides it.
const hessianJar = "/usr/share/java/hessian.jar"

// javaPeer compiles java/ into a temporary directory and returns the command
// line that runs DubboPeer. Without java, javac or the jar the test fails
// under CI and is skipped elsewhere.
func javaPeer(t *testing.T) []string {
	t.Helper()
	jar := os.Getenv("HESSIAN_JAR")
	if jar == "" {
		jar = hessianJar
	}
	java, errJava := exec.LookPath("java")
	javac, errJavac := exec.LookPath("javac")
	_, errJar := os.Stat(jar)
	if err := errors.Join(errJava, errJavac, errJar); err != nil {
		msg := fmt.Sprintf("the Java peer needs java, javac and Caucho Hessian's jar (%v): apt-get install openjdk-17-jdk-headless libhessian-java, or set HESSIAN_JAR", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	classes := t.TempDir()
	srcs := []string{filepath.Join("java", "DubboPeer.java"), filepath.Join("java", "org", "weft", "bench", "User.java")}
	// -Xlint:-path: Debian's jar names servlet-api in its Class-Path, which
	// Hessian's servlet classes want and this peer does not use.
	out, err := exec.Command(javac, append([]string{"-Xlint:all,-path", "-Werror", "-cp", jar, "-d", classes}, srcs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("javac the Java peer: %v\n%s", err, out)
	}
	// Hessian 4.0.38 reads JDK classes' private fields by reflection (its
	// StackTraceElement and collection deserializers), which Java 17 allows
	// only to the packages opened here.
	return []string{java, "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.util=ALL-UNNAMED",
		"-cp", classes + string(os.PathListSeparator) + jar, "DubboPeer"}
}

// javaProvider is DubboPeer's provider in a child process.
type javaProvider struct {
	addr string
	mu   sync.Mutex
	seen []string // its "seen $invoke ..." lines
}

// seenLines returns the provider's "seen" lines once it has printed n of
// them (or after 10 s): it prints each before it answers the call, but this
// side reads its stdout in another goroutine.
func (p *javaProvider) seenLines(n int) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		seen := append([]string(nil), p.seen...)
		p.mu.Unlock()
		if len(seen) >= n || time.Now().After(deadline) {
			return seen
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startJavaProvider starts the Java provider on a port of its choosing and
// returns once it listens.
func startJavaProvider(t *testing.T, peer []string) *javaProvider {
	t.Helper()
	cmd := exec.Command(peer[0], append(peer[1:], "provider", "127.0.0.1:0")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &javaProvider{}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "listening "); ok {
				ready <- a
				continue
			}
			p.mu.Lock()
			p.seen = append(p.seen, line)
			p.mu.Unlock()
		}
		close(ready)
	}()
	select {
	case a, ok := <-ready:
		if !ok {
			t.Fatalf("the Java provider exited: %s", stderr.String())
		}
		p.addr = a
	case <-time.After(30 * time.Second):
		t.Fatalf("the Java provider did not listen within 30 s: %s", stderr.String())
	}
	return p
}

// runJavaConsumer runs DubboPeer's consumer against addr and returns its
// results by call name.
func runJavaConsumer(t *testing.T, peer []string, addr string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, peer[0], append(peer[1:], "consumer", addr)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Java consumer: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(stdout.String()) {
		name, result, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if !ok {
			t.Fatalf("the Java consumer printed %q", line)
		}
		got[name] = result
	}
	return got
}

// What DubboPeer's consumer gets from org.weft.bench.EchoService, with the
// Java classes of the values. The generic results are Java's GenericFilter
// shape: a HashMap with "class", the List field an ArrayList.
var javaConsumerWants = map[string]string{
	"echo":             "String(hello)",
	"getUser":          "User{id=7, name=user-7, tags=ArrayList[String(a), String(b), String(c)], score=10.5}",
	"echoUser":         "User{id=5, name=ann!, tags=ArrayList[String(p), String(q)], score=2.5}",
	"$invoke echo":     "String(hi)",
	"$invoke getUser":  "HashMap{class=String(org.weft.bench.User), id=Long(7), name=String(user-7), score=Double(10.5), tags=ArrayList[String(a), String(b), String(c)]}",
	"$invoke echoUser": "HashMap{class=String(org.weft.bench.User), id=Long(5), name=String(ann!), score=Double(2.5), tags=ArrayList[String(p), String(q)]}",
}

// echoUserService is weftEcho with echoUser, which takes a POJO.
type echoUserService struct{ *weftEcho }

func (echoUserService) EchoUser(_ context.Context, u *dubbogo.User) (*dubbogo.User, error) {
	if u == nil {
		return nil, fmt.Errorf("echoUser: null user")
	}
	out := *u
	out.Name += "!"
	return &out, nil
}

// A Java consumer calls a weft provider, plain and generic ($invoke with
// String, String[] and Object[], as GenericService sends it), a POJO as
// argument and as result: it gets what it gets from the Java provider (the
// same table, checked against DubboPeer's own provider first). Before, the
// generic results' List field came back as a String[].
func TestJavaConsumerToWeftProvider(t *testing.T) {
	peer := javaPeer(t)
	// The reference: the Java consumer against the Java provider.
	jp := startJavaProvider(t, peer)
	if got := runJavaConsumer(t, peer, jp.addr); !reflect.DeepEqual(got, javaConsumerWants) {
		t.Fatalf("the Java peer against itself:\n got %v\nwant %v", got, javaConsumerWants)
	}

	addr, port := freeAddr(t)
	svc := echoUserService{&weftEcho{}}
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc))
	got := runJavaConsumer(t, peer, addr)
	for name, want := range javaConsumerWants {
		if got[name] != want {
			t.Errorf("%s from weft:\n got %s\nwant %s", name, got[name], want)
		}
	}
	if n := svc.echoes.Load(); n != 2 {
		t.Errorf("weft's echo ran %d times, want 2 (plain and generic)", n)
	}
}

type javaEchoClient struct {
	Echo     func(ctx context.Context, v string) (string, error)
	GetUser  func(ctx context.Context, id int64) (*dubbogo.User, error)
	EchoUser func(ctx context.Context, u *dubbogo.User) (*dubbogo.User, error)
}

// A weft consumer calls the Java provider: plain calls, whose descriptors the
// provider checks as Dubbo finds a method (by name and parameter types), and
// generic ones, through the generic client and `weft invoke`. The provider
// reports how $invoke's arguments read in Java without the signature's help:
// String[] and Object[], as from Java's GenericService (an untyped list
// reads as an ArrayList). Its generic results have the List as an ArrayList,
// which weft decodes as a list.
func TestWeftConsumerToJavaProvider(t *testing.T) {
	peer := javaPeer(t)
	cli := buildWeftCLI(t)
	jp := startJavaProvider(t, peer)
	var c javaEchoClient
	app := startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "dubbo://%s", timeout: 5000, retries: 0}
`, dubbogo.Interface, jp.addr))),
		weft.WithReference("echo", &c))
	ctx := context.Background()

	if got, err := c.Echo(ctx, "hello"); err != nil || got != "hello" {
		t.Fatalf("echo: %q %v", got, err)
	}
	u, err := c.GetUser(ctx, 9)
	if err != nil || u.ID != 9 || u.Name != "user-9" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 13.5 {
		t.Fatalf("getUser: %+v %v", u, err)
	}
	u, err = c.EchoUser(ctx, &dubbogo.User{ID: 5, Name: "ann", Tags: []string{"p", "q"}, Score: 2.5})
	if err != nil || u.ID != 5 || u.Name != "ann!" || strings.Join(u.Tags, ",") != "p,q" || u.Score != 2.5 {
		t.Fatalf("echoUser: %+v %v", u, err)
	}

	g := proxy.NewGenericClient(func() (kernel.Invoker, error) { return app.Reference("echo") })
	if v, err := g.GenericInvoke(ctx, "echo", []string{"java.lang.String"}, []any{"x"}); err != nil || v != "x" {
		t.Fatalf("generic echo: %#v %v", v, err)
	}
	v, err := g.GenericInvoke(ctx, "echoUser", []string{dubbogo.UserClass},
		[]any{map[string]any{"class": dubbogo.UserClass, "id": int64(6), "name": "bo", "tags": []any{"r"}, "score": 1.5}})
	want := map[any]any{"class": dubbogo.UserClass, "id": int64(6), "name": "bo!", "tags": []any{"r"}, "score": 1.5}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("generic echoUser:\n got %#v %v\nwant %#v", v, err, want)
	}

	url := "dubbo://" + jp.addr + "/" + dubbogo.Interface
	if out, err := weftInvoke(t, cli, url, "echo", `["z"]`); err != nil || strings.TrimSpace(out) != `"z"` {
		t.Fatalf("weft invoke echo: %q %v", out, err)
	}
	out, err := weftInvoke(t, cli, url, "echoUser", "["+userJSON+"]")
	if err != nil || !strings.Contains(out, `"name": "ann!"`) || !strings.Contains(out, `"tags": [`) {
		t.Fatalf("weft invoke echoUser: %q %v", out, err)
	}

	wantSeen := []string{
		"seen $invoke echo types=[Ljava.lang.String; args=[Ljava.lang.Object; generic=true",
		"seen $invoke echoUser types=[Ljava.lang.String; args=[Ljava.lang.Object; generic=true",
		"seen $invoke echo types=[Ljava.lang.String; args=[Ljava.lang.Object; generic=true",
		"seen $invoke echoUser types=[Ljava.lang.String; args=[Ljava.lang.Object; generic=true",
	}
	if seen := jp.seenLines(len(wantSeen)); !reflect.DeepEqual(seen, wantSeen) {
		t.Fatalf("the Java provider saw:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(wantSeen, "\n"))
	}
}
