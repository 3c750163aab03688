package dubbogo

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// rawCall sends one dubbo request, hessian2-encoded by hand (not by dubbo-go),
// over conn and returns the decoded response body values: the response flag,
// then the value or exception, then the attachments if present.
func rawCall(t *testing.T, conn net.Conn, id uint64, method, types string, args []any, att map[string]any) (status byte, body []any) {
	t.Helper()
	e := hessian.NewEncoder()
	for _, v := range []any{"2.0.2", Interface, "", method, types} {
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range args {
		if err := e.Encode(a); err != nil {
			t.Fatal(err)
		}
	}
	if att == nil {
		att = map[string]any{}
	}
	att["path"] = Interface
	att["interface"] = Interface
	if err := e.Encode(att); err != nil {
		t.Fatal(err)
	}
	payload := e.Buffer()
	hdr := make([]byte, 16)
	hdr[0], hdr[1] = 0xda, 0xbb
	hdr[2] = 0x80 | 0x40 | 2 // request, two-way, hessian2
	binary.BigEndian.PutUint64(hdr[4:], id)
	binary.BigEndian.PutUint32(hdr[12:], uint32(len(payload)))
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(append(hdr, payload...)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, hdr); err != nil {
		t.Fatal(err)
	}
	if hdr[0] != 0xda || hdr[1] != 0xbb || hdr[2]&0x80 != 0 || binary.BigEndian.Uint64(hdr[4:]) != id {
		t.Fatalf("bad response header % x", hdr)
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[12:]))
	if _, err := io.ReadFull(conn, resp); err != nil {
		t.Fatal(err)
	}
	d := hessian.NewDecoder(resp)
	for {
		v, err := d.Decode()
		if err != nil {
			break
		}
		body = append(body, v)
	}
	return hdr[3], body
}

// TestRawClient talks to the provider without dubbo-go on the client side,
// the way a weft consumer does, and pins down what dubbo-go puts on the wire.
func TestRawClient(t *testing.T) {
	ResetCalls()
	addr, stop := startProvider(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	status, body := rawCall(t, conn, 1, "echo", "Ljava/lang/String;", []any{"raw"}, map[string]any{ReqAttachment: "r1"})
	if status != 20 || len(body) < 3 {
		t.Fatalf("echo: status %d body %#v", status, body)
	}
	// 4 = RESPONSE_VALUE_WITH_ATTACHMENTS (the request said dubbo 2.0.2)
	if body[0] != int32(4) || body[1] != "raw" {
		t.Fatalf("echo body %#v", body)
	}
	att, _ := body[2].(map[any]any)
	if att[RespAttachment] != "resp-r1" {
		t.Fatalf("echo response attachments %#v", body[2])
	}
	t.Logf("echo response body: %#v", body)

	status, body = rawCall(t, conn, 2, "getUser", "J", []any{int64(7)}, nil)
	if status != 20 || len(body) < 2 {
		t.Fatalf("getUser: status %d body %#v", status, body)
	}
	if u, ok := body[1].(*User); !ok || u.Name != "user-7" || u.Score != 10.5 {
		t.Fatalf("getUser body %#v", body)
	}

	before := FailCalls.Load()
	status, body = rawCall(t, conn, 3, "fail", "Ljava/lang/String;", []any{"boom"}, nil)
	// 3 = RESPONSE_WITH_EXCEPTION_WITH_ATTACHMENTS; the response status is
	// still 20 (OK): a business exception is a value.
	if status != 20 || len(body) < 2 || body[0] != int32(3) {
		t.Fatalf("fail: status %d body %#v", status, body)
	}
	if n := FailCalls.Load() - before; n != 1 {
		t.Fatalf("fail ran %d times", n)
	}
	t.Logf("fail exception: %T %#v", body[1], body[1])

	conn.Close()
	time.Sleep(100 * time.Millisecond) // let the provider see the close
	stop()
}
