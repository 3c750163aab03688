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

// gRPC status codes (google.golang.org/grpc/codes, the same numbers).
const (
	statusOK                 = 0
	statusCanceled           = 1
	statusUnknown            = 2
	statusInvalidArgument    = 3
	statusDeadlineExceeded   = 4
	statusNotFound           = 5
	statusAlreadyExists      = 6
	statusPermissionDenied   = 7
	statusResourceExhausted  = 8
	statusFailedPrecondition = 9
	statusAborted            = 10
	statusOutOfRange         = 11
	statusUnimplemented      = 12
	statusInternal           = 13
	statusUnavailable        = 14
	statusDataLoss           = 15
	statusUnauthenticated    = 16
)

// The table between weft's error codes (Dubbo's RpcException codes) and
// gRPC's status codes. A weft provider also sends its own code in the
// tri-exception-code trailer, as Dubbo 3 does, so that weft and Dubbo
// consumers get the exact code back (timeout on the server side, forbidden
// ...) where a gRPC status is coarser; a gRPC peer reads the status alone.
//
//	weft code          gRPC status (sent)      gRPC status (received) -> weft code
//	unknown            UNKNOWN                 UNKNOWN, ABORTED, DATA_LOSS, others -> unknown
//	network            UNAVAILABLE             UNAVAILABLE -> network
//	timeout            DEADLINE_EXCEEDED       DEADLINE_EXCEEDED -> timeout
//	biz                UNKNOWN                 (a business error comes as the Dubbo code, or as
//	                                             INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
//	                                             FAILED_PRECONDITION, OUT_OF_RANGE -> biz: the
//	                                             application said no)
//	forbidden          PERMISSION_DENIED       PERMISSION_DENIED, UNAUTHENTICATED -> forbidden
//	serialization      INTERNAL                INTERNAL -> serialization
//	no provider        UNAVAILABLE
//	limit exceeded     RESOURCE_EXHAUSTED      RESOURCE_EXHAUSTED -> limit exceeded
//	method not found   UNIMPLEMENTED           UNIMPLEMENTED -> method not found
//	service not found  UNIMPLEMENTED
//	shutting down      UNAVAILABLE
//	                                           CANCELLED -> network (the call was cut)
func grpcStatusOf(code kernel.Code) int {
	switch code {
	case kernel.CodeNetwork, kernel.CodeNoProvider, kernel.CodeShuttingDown:
		return statusUnavailable
	case kernel.CodeTimeout:
		return statusDeadlineExceeded
	case kernel.CodeForbidden:
		return statusPermissionDenied
	case kernel.CodeSerialization:
		return statusInternal
	case kernel.CodeLimitExceeded:
		return statusResourceExhausted
	case kernel.CodeMethodNotFound, kernel.CodeServiceNotFound:
		return statusUnimplemented
	}
	return statusUnknown
}

// codeOfGRPCStatus is the other direction of the table, for a status with
// no tri-exception-code beside it.
func codeOfGRPCStatus(st int) kernel.Code {
	switch st {
	case statusCanceled, statusUnavailable:
		return kernel.CodeNetwork
	case statusDeadlineExceeded:
		return kernel.CodeTimeout
	case statusPermissionDenied, statusUnauthenticated:
		return kernel.CodeForbidden
	case statusInternal:
		return kernel.CodeSerialization
	case statusResourceExhausted:
		return kernel.CodeLimitExceeded
	case statusUnimplemented:
		return kernel.CodeMethodNotFound
	case statusInvalidArgument, statusNotFound, statusAlreadyExists, statusFailedPrecondition, statusOutOfRange:
		return kernel.CodeBiz
	}
	// dubbo-go 3.3's IDL providers answer a method's error with status 17
	// (its CodeBizError), past gRPC's last code, and no tri-exception-code.
	// Java Dubbo fails on it (TriRpcStatus.Code.fromCode throws), so it is
	// not read as a business error here either: an unknown error, with the
	// text and the status (test/interop/triple_dubbogo_test.go).
	return kernel.CodeUnknown
}

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

// formatTimeout writes d as grpc-timeout, in the finest unit that fits 8
// digits (rounded up, so that the peer's deadline is never before ours).
func formatTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	const max = 99999999
	for _, u := range []struct {
		d time.Duration
		c byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}} {
		n := (d + u.d - 1) / u.d
		if n <= max {
			return strconv.FormatInt(int64(n), 10) + string(u.c)
		}
	}
	return "99999999H"
}

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
