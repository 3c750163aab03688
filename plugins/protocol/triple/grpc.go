package triple

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/weftrpc/weft/kernel"
)

// gRPC status codes: kernel's (one table for Triple and the proxy-wasm host).
const (
	statusOK                 = kernel.GRPCOK
	statusCanceled           = kernel.GRPCCanceled
	statusUnknown            = kernel.GRPCUnknown
	statusInvalidArgument    = kernel.GRPCInvalidArgument
	statusDeadlineExceeded   = kernel.GRPCDeadlineExceeded
	statusNotFound           = kernel.GRPCNotFound
	statusAlreadyExists      = kernel.GRPCAlreadyExists
	statusPermissionDenied   = kernel.GRPCPermissionDenied
	statusResourceExhausted  = kernel.GRPCResourceExhausted
	statusFailedPrecondition = kernel.GRPCFailedPrecondition
	statusAborted            = kernel.GRPCAborted
	statusOutOfRange         = kernel.GRPCOutOfRange
	statusUnimplemented      = kernel.GRPCUnimplemented
	statusInternal           = kernel.GRPCInternal
	statusUnavailable        = kernel.GRPCUnavailable
	statusDataLoss           = kernel.GRPCDataLoss
	statusUnauthenticated    = kernel.GRPCUnauthenticated
)

// grpcStatusOf and codeOfGRPCStatus are kernel's table (kernel.GRPCStatus).
func grpcStatusOf(code kernel.Code) int { return kernel.GRPCStatus(code) }

func codeOfGRPCStatus(st int) kernel.Code { return kernel.CodeOfGRPCStatus(st) }

// maxTimeout caps what a grpc-timeout may ask for: gRPC's own clients send
// at most 8 digits of any unit, and a deadline years away is no deadline.
const maxTimeout = 100 * 24 * time.Hour

// parseTimeout reads a grpc-timeout value: 1 to 8 digits and a unit (H, M,
// S, m, u, n).
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("grpc-timeout %q: want 1 to 8 digits and a unit (H M S m u n)", cut(v))
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil || v[0] == '+' {
		return 0, fmt.Errorf("grpc-timeout %q: want 1 to 8 digits and a unit (H M S m u n)", cut(v))
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("grpc-timeout %q: unknown unit %q (H M S m u n)", cut(v), v[len(v)-1])
	}
	if time.Duration(n) > maxTimeout/unit {
		return maxTimeout, nil
	}
	return time.Duration(n) * unit, nil
}

// formatTimeout writes d as grpc-timeout (kernel.FormatGRPCTimeout).
func formatTimeout(d time.Duration) string { return kernel.FormatGRPCTimeout(d) }

// encodeMessage percent-encodes a grpc-message value: bytes outside
// printable ASCII, and '%', as %XX.
func encodeMessage(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '%' {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decodeMessage undoes encodeMessage; a malformed escape stays as it is,
// as gRPC's libraries do.
func decodeMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeBinaryHeader decodes a -bin metadata value: base64, padded or not
// (gRPC sends it unpadded and accepts both).
func decodeBinaryHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// reservedHeader reports the headers that are the protocol's, not the
// call's metadata: they never become attachments.
func reservedHeader(k string) bool {
	switch k {
	case "content-type", "te", "user-agent", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding",
		"grpc-message-type", "grpc-status", "grpc-message", "grpc-status-details-bin", "grpc-previous-rpc-attempts",
		"content-length", "accept-encoding", "connection", "host":
		return true
	}
	return strings.HasPrefix(k, ":")
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

type hpackField = hpack.HeaderField

func base64Raw(b []byte) string { return base64.RawStdEncoding.EncodeToString(b) }

// validHeaderName: lower-case token characters, as HTTP/2 requires.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validHeaderValue: printable ASCII and spaces (a value with others goes
// as -bin, or not at all).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
