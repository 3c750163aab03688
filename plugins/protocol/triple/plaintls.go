package triple

import (
	"encoding/binary"
	"io"
	"strconv"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

var _ netty.PlainRefuser = (*codec)(nil)

// RefusePlain is netty.PlainRefuser: on a TLS port, a client whose first
// bytes are the HTTP/2 preface (a weft or gRPC consumer without TLS, h2c
// with prior knowledge) is answered in HTTP/2 (refuseH2); a plain HTTP/1.1
// request (curl http://) gets a 400 saying why, as Go's own HTTPS server
// answers one.
func (c *codec) RefusePlain(rw io.ReadWriter, first16 []byte, why string) bool {
	n := min(len(first16), len(h2.ClientPreface))
	switch {
	case n > 0 && string(first16[:n]) == h2.ClientPreface[:n]:
		refuseH2(rw, why+", or TLS credentials on a gRPC client")
		return true
	case c.maxBody > 0 && isHTTP1(first16):
		body := "weft: " + why + " (an https:// URL)\n"
		rw.Write([]byte("HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body))
		return true
	}
	return false
}

// refuseH2 answers a plaintext HTTP/2 client: the server's SETTINGS at once
// (a client waits for them before it trusts the connection); then, if the
// client sends a call in the time rw allows (its HEADERS within 64 KiB of
// frames), that call gets gRPC status UNAVAILABLE with why (trailers only);
// and last a GOAWAY INADEQUATE_SECURITY with why as its debug data, its
// last stream that call's, or 0 when none came (a weft consumer connects
// before its first call). Both matter: grpc-go retries a call that a
// GOAWAY alone refused and then reports only the connection's close,
// while it reports a call's status as it is; the weft client reports
// either.
func refuseH2(rw io.ReadWriter, why string) {
	if _, err := rw.Write(h2.AppendSettings(nil)); err != nil {
		return
	}
	r := io.LimitReader(rw, 64<<10)
	var call uint32
	if _, err := io.ReadFull(r, make([]byte, len(h2.ClientPreface))); err == nil {
		hdr := make([]byte, h2.FrameHeaderLen)
		for {
			if _, err := io.ReadFull(r, hdr); err != nil {
				break
			}
			if id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff; hdr[3] == h2.FrameHeaders && id%2 == 1 {
				call = id
				break
			}
			n := int64(hdr[0])<<16 | int64(hdr[1])<<8 | int64(hdr[2])
			if _, err := io.CopyN(io.Discard, r, n); err != nil {
				break
			}
		}
	}
	var b []byte
	if call != 0 {
		b = appendTrailersOnly(b, call, 200, statusUnavailable, why, kernel.CodeNetwork)
	}
	rw.Write(h2.AppendGoAway(b, call, h2.CodeInadequateSecurity, why))
}
