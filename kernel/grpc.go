package kernel

import (
	"strconv"
	"time"
)

// gRPC status codes (google.golang.org/grpc/codes, the same numbers): what a
// Triple call's grpc-status carries, and what a proxy-wasm filter reads and
// writes in a call's trailers.
const (
	GRPCOK                 = 0
	GRPCCanceled           = 1
	GRPCUnknown            = 2
	GRPCInvalidArgument    = 3
	GRPCDeadlineExceeded   = 4
	GRPCNotFound           = 5
	GRPCAlreadyExists      = 6
	GRPCPermissionDenied   = 7
	GRPCResourceExhausted  = 8
	GRPCFailedPrecondition = 9
	GRPCAborted            = 10
	GRPCOutOfRange         = 11
	GRPCUnimplemented      = 12
	GRPCInternal           = 13
	GRPCUnavailable        = 14
	GRPCDataLoss           = 15
	GRPCUnauthenticated    = 16
)

// GRPCStatus is the gRPC status weft sends for an error of code. The table
// between weft's codes (Dubbo's RpcException codes) and gRPC's, one copy for
// the Triple protocol and the proxy-wasm host. A weft provider also sends
// its own code in the tri-exception-code trailer, as Dubbo 3 does, so that
// weft and Dubbo consumers get the exact code back where a gRPC status is
// coarser; a gRPC peer reads the status alone.
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
func GRPCStatus(code Code) int {
	switch code {
	case CodeNetwork, CodeNoProvider, CodeShuttingDown:
		return GRPCUnavailable
	case CodeTimeout:
		return GRPCDeadlineExceeded
	case CodeForbidden:
		return GRPCPermissionDenied
	case CodeSerialization:
		return GRPCInternal
	case CodeLimitExceeded:
		return GRPCResourceExhausted
	case CodeMethodNotFound, CodeServiceNotFound:
		return GRPCUnimplemented
	}
	return GRPCUnknown
}

// CodeOfGRPCStatus is the other direction of GRPCStatus's table, for a
// status with no tri-exception-code beside it.
func CodeOfGRPCStatus(st int) Code {
	switch st {
	case GRPCCanceled, GRPCUnavailable:
		return CodeNetwork
	case GRPCDeadlineExceeded:
		return CodeTimeout
	case GRPCPermissionDenied, GRPCUnauthenticated:
		return CodeForbidden
	case GRPCInternal:
		return CodeSerialization
	case GRPCResourceExhausted:
		return CodeLimitExceeded
	case GRPCUnimplemented:
		return CodeMethodNotFound
	case GRPCInvalidArgument, GRPCNotFound, GRPCAlreadyExists, GRPCFailedPrecondition, GRPCOutOfRange:
		return CodeBiz
	}
	// dubbo-go 3.3's IDL providers answer a method's error with status 17
	// (its CodeBizError), past gRPC's last code, and no tri-exception-code.
	// Java Dubbo fails on it (TriRpcStatus.Code.fromCode throws), so it is
	// not read as a business error here either: an unknown error, with the
	// text and the status (test/interop/triple_dubbogo_test.go).
	return CodeUnknown
}

// FormatGRPCTimeout writes d as a grpc-timeout value, in the finest unit
// that fits 8 digits (rounded up, so that the peer's deadline is never
// before ours).
func FormatGRPCTimeout(d time.Duration) string { return string(AppendGRPCTimeout(nil, d)) }

// AppendGRPCTimeout appends FormatGRPCTimeout(d) to dst.
func AppendGRPCTimeout(dst []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(dst, "1n"...)
	}
	const max = 99999999
	for _, u := range []struct {
		d time.Duration
		c byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}} {
		n := (d + u.d - 1) / u.d
		if n <= max {
			return append(strconv.AppendInt(dst, int64(n), 10), u.c)
		}
	}
	return append(dst, "99999999H"...)
}
