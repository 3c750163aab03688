package test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	netty "github.com/weftrpc/weft/transport-netty"
	"go.uber.org/goleak"
)

// Helpers of the hostile-input tests (issue 10): a provider App in a child
// process (crash-prone inputs must not take the test binary down with
// them), raw Dubbo frames built byte by byte, and a raw client reading the
// answers.

const (
	hostileChildEnv    = "WEFTTEST_HOSTILE_PROVIDER" // the provider's YAML config (test/hostileprovider)
	hostileFreeMemEnv  = "WEFTTEST_HOSTILE_FREEMEM"  // "1": debug.FreeOSMemory every 200 ms
	strInterface       = "org.weft.Str"
	stringDescriptor   = "Ljava/lang/String;"
	hostileChildBanner = "ready"
)

// hostileBinary builds test/hostileprovider once per test binary, without
// the race detector whatever this binary was built with: its crashes and
// memory are those of a real provider.
var hostileBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "weft-hostile")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hostileprovider")
	cmd := exec.Command("go", "build", "-o", bin, "./hostileprovider")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./test/hostileprovider: %v\n%s", err, out)
	}
	return bin, nil
})

// childProvider is a provider process started by startHostileChild.
type childProvider struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has ended
	stderr *syncBuffer   // config_center_test.go
}

// alive reports whether the process still runs.
func (c *childProvider) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// why describes how the child ended, with the start of its stderr (a Go
// crash prints "fatal error: stack overflow" first).
func (c *childProvider) why() string {
	s := c.stderr.String()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	state := "running"
	if !c.alive() {
		state = c.cmd.ProcessState.String()
	}
	return fmt.Sprintf("provider process %s; stderr: %s", state, s)
}

// startHostileChild starts a provider process exporting strSvc as
// org.weft.Str over dubbo on a free port. protocol is extra keys of
// protocols.dubbo, service extra keys of the service (YAML flow map
// entries, each starting with ", ").
func startHostileChild(t *testing.T, protocol, service string, env ...string) *childProvider {
	t.Helper()
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	cfg := fmt.Sprintf(`
protocols: {dubbo: {port: %s%s}}
provider:
  services:
    str: {interface: %s%s}
`, port, protocol, strInterface, service)
	bin, err := hostileBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), hostileChildEnv+"="+cfg), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &childProvider{addr: addr, cmd: cmd, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-c.exited
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != hostileChildBanner {
		<-c.exited
		t.Fatalf("child provider: %q; %s", line, c.why())
	}
	return c
}

// --- hessian2 and Dubbo frames, by hand ---

// hStr appends s (ASCII) as a hessian2 string, in chunks of 65535
// characters for a long one.
func hStr(dst []byte, s string) []byte {
	for len(s) > 0xffff {
		dst = append(dst, 'R', 0xff, 0xff)
		dst = append(dst, s[:0xffff]...)
		s = s[0xffff:]
	}
	switch n := len(s); {
	case n < 32:
		dst = append(dst, byte(n))
	case n < 1024:
		dst = append(dst, 0x30+byte(n>>8), byte(n))
	default:
		dst = append(dst, 'S', byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

// hInt appends i as a hessian2 'I' int (5 bytes).
func hInt(dst []byte, i int32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, 'I'), uint32(i))
}

// hRef appends a back reference to the n-th object of the stream (n < 48:
// 0x51 and a one-byte int).
func hRef(dst []byte, n int) []byte {
	if n < 48 {
		return append(dst, 0x51, byte(0x90+n))
	}
	return append(dst, 0x51, byte(0xc8+n>>8), byte(n)) // two-byte int
}

// requestBody is a Dubbo request body: the five header strings, the
// argument bytes as given, and the attachments path and interface.
func requestBody(method, desc string, args []byte) []byte {
	b := hStr(nil, dubbo.DubboVersion)
	b = hStr(b, strInterface)
	b = hStr(b, "")
	b = hStr(b, method)
	b = hStr(b, desc)
	b = append(b, args...)
	return attachments(b)
}

// attachments appends the map H path interface Z.
func attachments(b []byte) []byte {
	b = append(b, 'H')
	b = hStr(b, "path")
	b = hStr(b, strInterface)
	b = hStr(b, "interface")
	b = hStr(b, strInterface)
	return append(b, 'Z')
}

// frameHeader is a request header: magic, flag 0xc2 (request, two-way,
// hessian2), status 0, id, body length.
func frameHeader(id uint64, bodyLen uint32) []byte {
	h := make([]byte, 16, 16)
	binary.BigEndian.PutUint16(h, 0xdabb)
	h[2] = 0xc2
	binary.BigEndian.PutUint64(h[4:], id)
	binary.BigEndian.PutUint32(h[12:], bodyLen)
	return h
}

// requestFrame is a whole request frame.
func requestFrame(id uint64, body []byte) []byte {
	return append(frameHeader(id, uint32(len(body))), body...)
}

// echoFrame is a valid call of echo("ping...").
func echoFrame(id uint64, s string) []byte {
	return requestFrame(id, requestBody("echo", stringDescriptor, hStr(nil, s)))
}

// rawConn is a Dubbo client of raw bytes.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *rawConn) send(t *testing.T, b []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// readCodec decodes answers of up to 64 MiB, so that an oversized answer
// (an 8-million-character error) is read and measured, not refused.
var readCodec = dubbo.NewCodec(64 << 20)

// response is one answer frame.
type response struct {
	*netty.Response
	bodyLen int
}

// read reads the next response frame within d. A heartbeat from the
// provider is skipped.
func (c *rawConn) read(d time.Duration) (*response, error) {
	c.SetReadDeadline(time.Now().Add(d))
	for {
		hdr := make([]byte, 16)
		if _, err := io.ReadFull(c.r, hdr); err != nil {
			return nil, err
		}
		n := binary.BigEndian.Uint32(hdr[12:])
		if n > 64<<20 {
			return nil, fmt.Errorf("answer claims a body of %d bytes", n)
		}
		frame := make([]byte, 16+int(n))
		copy(frame, hdr)
		if _, err := io.ReadFull(c.r, frame[16:]); err != nil {
			return nil, err
		}
		msg, _, err := readCodec.Decode(frame)
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *netty.Response:
			if m.Event {
				continue
			}
			return &response{Response: m, bodyLen: int(n)}, nil
		case *netty.Request: // a heartbeat from the provider: answer it
			if m.Event {
				ans, _ := readCodec.Encode(nil, &netty.Response{ID: m.ID, Status: kernel.ResponseOK, Event: true})
				c.Write(ans)
			}
			continue
		default:
			return nil, fmt.Errorf("unexpected frame %T", msg)
		}
	}
}

// value is the result of an OK response.
func (r *response) value() any {
	if res, ok := r.Data.(*dubbo.RPCResult); ok {
		if res.Exception != nil {
			return res.Exception
		}
		return res.Value
	}
	return nil
}

func (r *response) String() string {
	if r.Status != kernel.ResponseOK {
		msg := r.ErrMsg
		if len(msg) > 300 {
			msg = fmt.Sprintf("%s...(%d bytes)", msg[:300], len(msg))
		}
		return fmt.Sprintf("id %d status %d %q", r.ID, r.Status, msg)
	}
	return fmt.Sprintf("id %d status 20 %v", r.ID, r.value())
}

// echoWorks checks that a new connection to addr is served: echo answers.
func echoWorks(t *testing.T, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.Close()
	c.send(t, echoFrame(7, "still here"))
	r, err := c.read(3 * time.Second)
	if err != nil {
		t.Fatalf("a normal call on a new connection: %v", err)
	}
	if r.Status != kernel.ResponseOK || r.value() != "still here" {
		t.Fatalf("a normal call on a new connection: %v", r)
	}
}

// strSvc is the String service of the in-process providers (the child's is
// test/hostileprovider's twin).
type strSvc struct{}

func (strSvc) Echo(_ context.Context, s string) (string, error) { return s, nil }

// startStrProvider starts, in this process, a provider App exporting strSvc
// as org.weft.Str over dubbo at addr; protocol is extra keys of
// protocols.dubbo (", payload: 1048576").
func startStrProvider(t *testing.T, addr, protocol string) *weft.App {
	t.Helper()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("str", strSvc{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %s%s}}
provider:
  services:
    str: {interface: %s}
`, port, protocol, strInterface))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}

// noLeaks fails t if goroutines started during the test outlive it (its
// cleanups included: registered first, it runs last). The package has no
// goleak TestMain of its own (frozen_test.go's starts child processes).
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
