package xds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/weftrpc/weft/kernel"
)

// Fault is an HTTP fault filter's config as gRPC applies it (gRFC A33):
// a delay (fixed, or the call's x-envoy-fault-delay-request header) and
// an abort (a gRPC status, an HTTP status mapped to one, or the call's
// x-envoy-fault-abort-* headers), each on a share of the calls, at most
// MaxActive calls faulted at once.
type Fault struct {
	HasMax    bool
	MaxActive uint32

	Delay              time.Duration
	DelayHeader        bool
	DelayNum, DelayDen int

	// AbortCode is the gRPC status; -1: no abort (an HTTP status outside
	// 200..599 is none, as in gRPC).
	AbortCode          int
	AbortHeader        bool
	AbortNum, AbortDen int
}

// active reports whether f does anything (gRPC skips the filter when
// max_active_faults is 0 or there is neither a delay nor an abort).
func (f *Fault) active() bool {
	return f != nil && !(f.HasMax && f.MaxActive == 0) && (f.Delay > 0 || f.DelayHeader || f.AbortCode >= 0 || f.AbortHeader)
}

// The headers a call sets to ask for faults (Envoy's, which gRPC reads).
const (
	headerAbortHTTPStatus = "x-envoy-fault-abort-request"
	headerAbortGRPCStatus = "x-envoy-fault-abort-grpc-request"
	headerAbortPercentage = "x-envoy-fault-abort-request-percentage"
	headerDelayPercentage = "x-envoy-fault-delay-request-percentage"
	headerDelayDuration   = "x-envoy-fault-delay-request"
)

// The filter types weft knows in an HTTP connection manager.
const (
	faultURL  = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
	routerURL = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
)

// HTTPFilter is one of a listener's HTTP filters weft applies: a fault
// filter, by its name (the key of the routes' overrides).
type HTTPFilter struct {
	Name  string
	Fault *Fault
}

// maxHTTPFilters bounds a connection manager's filters.
const maxHTTPFilters = 100

// httpFilters is grpc-go's processHTTPFilters for a client: the fault
// filters, the router last; a filter weft does not know is refused unless
// it is optional.
func httpFilters(fs []*hcmv3.HttpFilter) ([]HTTPFilter, error) {
	if len(fs) == 0 {
		return nil, errors.New("http filters list is empty")
	}
	if len(fs) > maxHTTPFilters {
		return nil, fmt.Errorf("%d http filters, over weft's bound of %d", len(fs), maxHTTPFilters)
	}
	var out []HTTPFilter
	seen := map[string]bool{}
	for i, f := range fs {
		name := f.GetName()
		if seen[name] {
			return nil, fmt.Errorf("duplicate filter name %q", name)
		}
		seen[name] = true
		cfg := f.GetTypedConfig()
		if cfg == nil {
			if f.GetIsOptional() {
				continue
			}
			return nil, fmt.Errorf("http filter missing config for filter %v", name)
		}
		last := i == len(fs)-1
		switch cfg.GetTypeUrl() {
		case routerURL:
			var r routerv3.Router
			if err := cfg.UnmarshalTo(&r); err != nil {
				return nil, fmt.Errorf("error parsing config for filter %q: %v", routerURL, err)
			}
			if !last {
				return nil, fmt.Errorf("http filter %q is a terminal filter but it is not last in the filter chain", name)
			}
			return out, nil
		case faultURL:
			fault, err := parseFault(cfg)
			if err != nil {
				return nil, err
			}
			out = append(out, HTTPFilter{Name: name, Fault: fault})
		default:
			if f.GetIsOptional() {
				continue
			}
			return nil, fmt.Errorf("no filter implementation found for %q", cfg.GetTypeUrl())
		}
		if last {
			return nil, fmt.Errorf("http filter %q is not a terminal filter", name)
		}
	}
	return nil, fmt.Errorf("http filter %q is not a terminal filter", fs[len(fs)-1].GetName())
}

func parseFault(a *anypb.Any) (*Fault, error) {
	var hf faultv3.HTTPFault
	if err := a.UnmarshalTo(&hf); err != nil {
		return nil, fmt.Errorf("error parsing config for filter %q: fault: %v", faultURL, err)
	}
	f := &Fault{AbortCode: -1}
	if m := hf.GetMaxActiveFaults(); m != nil {
		f.HasMax, f.MaxActive = true, m.GetValue()
	}
	if d := hf.GetDelay(); d != nil {
		f.DelayNum, f.DelayDen = splitPct(d.GetPercentage())
		switch t := d.GetFaultDelaySecifier().(type) {
		case *commonfaultv3.FaultDelay_FixedDelay:
			f.Delay = t.FixedDelay.AsDuration()
		case *commonfaultv3.FaultDelay_HeaderDelay_:
			f.DelayHeader = true
		}
	}
	if ab := hf.GetAbort(); ab != nil {
		f.AbortNum, f.AbortDen = splitPct(ab.GetPercentage())
		switch t := ab.GetErrorType().(type) {
		case *faultv3.FaultAbort_HttpStatus:
			f.AbortCode = grpcFromHTTP(int(t.HttpStatus))
		case *faultv3.FaultAbort_GrpcStatus:
			f.AbortCode = sanitizeGRPC(int(t.GrpcStatus))
		case *faultv3.FaultAbort_HeaderAbort_:
			f.AbortHeader = true
		}
	}
	return f, nil
}

// faultOverrides are a route's, virtual host's or weighted cluster's
// typed_per_filter_config: the fault filters' overrides by filter name.
func faultOverrides(m map[string]*anypb.Any) (map[string]*Fault, error) {
	if len(m) > maxHTTPFilters {
		return nil, fmt.Errorf("%d filter overrides, over weft's bound of %d", len(m), maxHTTPFilters)
	}
	var out map[string]*Fault
	for name, cfg := range m {
		optional := false
		var fc routev3.FilterConfig
		if cfg.MessageIs(&fc) {
			if err := cfg.UnmarshalTo(&fc); err != nil {
				return nil, fmt.Errorf("filter override %q: error unmarshalling FilterConfig: %v", name, err)
			}
			cfg, optional = fc.GetConfig(), fc.GetIsOptional()
		}
		switch cfg.GetTypeUrl() {
		case faultURL:
			f, err := parseFault(cfg)
			if err != nil {
				return nil, fmt.Errorf("filter override %q: %v", name, err)
			}
			if out == nil {
				out = map[string]*Fault{}
			}
			out[name] = f
		default:
			if !optional {
				return nil, fmt.Errorf("filter override %q: no filter implementation found for %q", name, cfg.GetTypeUrl())
			}
		}
	}
	return out, nil
}

func splitPct(fp *typev3.FractionalPercent) (num, den int) {
	if fp == nil {
		return 0, 100
	}
	num = int(fp.GetNumerator())
	switch fp.GetDenominator() {
	case typev3.FractionalPercent_TEN_THOUSAND:
		return num, 10_000
	case typev3.FractionalPercent_MILLION:
		return num, 1_000_000
	}
	return num, 100
}

// grpcFromHTTP is gRPC's mapping of an abort's HTTP status; -1: none.
func grpcFromHTTP(st int) int {
	if st < 200 || st >= 600 {
		return -1
	}
	switch st {
	case 400:
		return kernel.GRPCInternal
	case 401:
		return kernel.GRPCUnauthenticated
	case 403:
		return kernel.GRPCPermissionDenied
	case 404:
		return kernel.GRPCUnimplemented
	case 429, 502, 503, 504:
		return kernel.GRPCUnavailable
	}
	return kernel.GRPCUnknown
}

func sanitizeGRPC(c int) int {
	if c < 0 || c > 16 {
		return kernel.GRPCUnknown
	}
	return c
}

// injector applies faults in order to a call, as grpc-go's fault
// interceptor does; active counts the calls faulted now (gRPC's count is
// the process's; weft's is the registry's).
func injector(faults []*Fault, active *atomic.Int64) func(ctx context.Context, inv *kernel.Invocation) (bool, error) {
	return func(ctx context.Context, inv *kernel.Invocation) (bool, error) {
		for _, f := range faults {
			if end, err := f.inject(ctx, inv, active); end || err != nil {
				return end, err
			}
		}
		return false, nil
	}
}

func (f *Fault) inject(ctx context.Context, inv *kernel.Invocation, active *atomic.Int64) (bool, error) {
	if f.HasMax {
		defer active.Add(-1)
		if active.Add(1) > int64(f.MaxActive) {
			return false, nil // past max_active_faults: the call goes on unfaulted
		}
	}
	if err := f.delay(ctx, inv); err != nil {
		return true, kernel.Wrap(kernel.CodeTimeout, err, "the call's deadline passed during an injected delay")
	}
	code, ok := f.abort(inv)
	if !ok {
		return false, nil
	}
	if code == kernel.GRPCOK {
		return true, nil // gRPC ends the call with OK and no answer
	}
	return true, kernel.Errorf(kernel.CodeOfGRPCStatus(code), "RPC terminated due to fault injection (gRPC status %d)", code)
}

func (f *Fault) delay(ctx context.Context, inv *kernel.Invocation) error {
	num, d := f.DelayNum, f.Delay
	if f.DelayHeader {
		ms, ok := intAttachment(inv, headerDelayDuration)
		if !ok {
			return nil
		}
		d = time.Duration(ms) * time.Millisecond
		if p, ok := intAttachment(inv, headerDelayPercentage); ok && p < num {
			num = p
		}
	}
	if d <= 0 || rand.IntN(max(f.DelayDen, 1)) >= num {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Fault) abort(inv *kernel.Invocation) (int, bool) {
	num, code := f.AbortNum, f.AbortCode
	if f.AbortHeader {
		code = -1
		if st, ok := intAttachment(inv, headerAbortHTTPStatus); ok {
			code = grpcFromHTTP(st)
		} else if st, ok := intAttachment(inv, headerAbortGRPCStatus); ok {
			code = sanitizeGRPC(st)
		}
		if p, ok := intAttachment(inv, headerAbortPercentage); ok && p < num {
			num = p
		}
	}
	if code < 0 || rand.IntN(max(f.AbortDen, 1)) >= num {
		return 0, false
	}
	return code, true
}

func intAttachment(inv *kernel.Invocation, k string) (int, bool) {
	s := inv.AttachmentString(k)
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
