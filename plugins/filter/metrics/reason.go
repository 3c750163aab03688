package metrics

import "github.com/weftrpc/weft/kernel"

// A reason is why a call failed, as Dubbo 3 counts failures: each has its
// own counter beside dubbo_<side>_requests_failed_total, which counts them
// all.
type reason uint8

const (
	reasonBusiness reason = iota
	reasonTimeout
	reasonLimit
	reasonNetwork
	reasonCodec
	reasonServiceUnavailable
	reasonUnknown
	numReasons
)

// reasonNames are the counters' names after dubbo_<side>_requests_, Java
// Dubbo 3's MetricsKey (dubbo-go 3.3 has only the total).
var reasonNames = [numReasons]string{
	reasonBusiness:           "business_failed_total",
	reasonTimeout:            "timeout_total",
	reasonLimit:              "limit_total",
	reasonNetwork:            "failed_network_total",
	reasonCodec:              "failed_codec_total",
	reasonServiceUnavailable: "failed_service_unavailable_total",
	reasonUnknown:            "unknown_failed_total",
}

var reasonHelp = [numReasons]string{
	reasonBusiness:           "Total Failed Business Requests",
	reasonTimeout:            "Total Timeout Failed Requests",
	reasonLimit:              "Total Limit Failed Requests",
	reasonNetwork:            "Total network Failed Requests",
	reasonCodec:              "Total Codec Failed Requests",
	reasonServiceUnavailable: "Total Service Unavailable Failed Requests",
	reasonUnknown:            "Total Unknown Failed Requests",
}

// reasonOf maps weft's error codes (kernel/errors.go) onto Dubbo's
// reasons. It follows Java's MetricsSupport.getMetricsKey (timeout, limit,
// biz, serialization, network) and MetricsClusterFilter (no provider,
// Java's FORBIDDEN_EXCEPTION 4, is "service unavailable"); weft's own codes
// for a provider that cannot take the call go there too:
//
//	biz                                  -> business_failed
//	timeout                              -> timeout
//	limit exceeded                       -> limit
//	network                              -> failed_network
//	serialization                        -> failed_codec
//	no provider, forbidden,
//	service not found, shutting down     -> failed_service_unavailable
//	method not found, unknown, others    -> unknown_failed
var reasonOf = func() [256]reason {
	var t [256]reason
	for i := range t {
		t[i] = reasonUnknown
	}
	t[kernel.CodeBiz] = reasonBusiness
	t[kernel.CodeTimeout] = reasonTimeout
	t[kernel.CodeLimitExceeded] = reasonLimit
	t[kernel.CodeNetwork] = reasonNetwork
	t[kernel.CodeSerialization] = reasonCodec
	t[kernel.CodeNoProvider] = reasonServiceUnavailable
	t[kernel.CodeForbidden] = reasonServiceUnavailable
	t[kernel.CodeServiceNotFound] = reasonServiceUnavailable
	t[kernel.CodeShuttingDown] = reasonServiceUnavailable
	return t
}()

// Reason is the name of the reason counter err counts in (after
// dubbo_<side>_requests_), "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	return reasonNames[reasonOf[kernel.CodeOf(err)]]
}
