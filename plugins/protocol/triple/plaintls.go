package triple

import (
	"fmt"
	"strconv"

	netty "github.com/weftrpc/weft/transport-netty"
)

// HTTP/2's INADEQUATE_SECURITY (RFC 9113 §7): the peer's connection is not
// secure enough, the error of a plaintext client on a TLS port.
const errInadequateSecurity = 0xc

var _ netty.PlainRefuser = (*codec)(nil)

// RefusePlain is netty.PlainRefuser: on a TLS port, a client whose first
// bytes are the HTTP/2 preface (a weft or gRPC consumer without TLS, h2c
// with prior knowledge) is answered in HTTP/2, the server's SETTINGS then
// GOAWAY INADEQUATE_SECURITY with why as its debug data, which the weft
// client reports as the call's error and grpc-go as the GOAWAY's; a plain
// HTTP/1.1 request (curl http://) gets a 400 saying why, as Go's own HTTPS
// server answers one.
func (c *codec) RefusePlain(first16 []byte, why string) ([]byte, bool) {
	n := min(len(first16), len(clientPreface))
	switch {
	case n > 0 && string(first16[:n]) == clientPreface[:n]:
		b := appendSettings(nil)
		return appendGoAway(b, 0, errInadequateSecurity, why+", or TLS credentials on a gRPC client"), true
	case c.maxBody > 0 && isHTTP1(first16):
		body := "weft: " + why + " (an https:// URL)\n"
		return []byte("HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body), true
	}
	return nil, false
}

// goAwayName is an HTTP/2 error code's name, as RFC 9113 §7 and grpc-go
// spell it.
func goAwayName(code uint32) string {
	names := [...]string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
		"STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
		"ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("error code %d", code)
}
