package xds

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftrpc/weft/kernel"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// faultListener is listener() with a fault filter named "fault" (that
// does nothing itself) before the router.
func faultListener(t *testing.T) *listenerv3.Listener {
	hcm := anyOf(t, &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			RouteConfigName: route,
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &faultv3.HTTPFault{})}},
			{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}},
		},
	})
	return &listenerv3.Listener{Name: target, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}
}

// TestMeshFaultInjection: the listener's fault filter, overridden per
// route or virtual host (A33): an abort of a share of the calls with a
// gRPC status, one asked for by the call's headers, and a fixed delay.
func TestMeshFaultInjection(t *testing.T) {
	cp := startControlPlane(t, "")
	_, addr, _ := startProvider(t, "a")
	res := snapshot(map[string]uint32{"echo": 1}, clusterv3.Cluster_ROUND_ROBIN, endpoints("echo", []string{addr}))
	res[resource.ListenerType] = []types.Resource{faultListener(t)}
	cp.set(t, "1", res)
	c := startConsumer(t, cp.addr)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Who(ctx, "x"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no call succeeded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	setFault := func(version string, onRoute bool, f *faultv3.HTTPFault) {
		rc := routes(map[string]uint32{"echo": 1})
		override := map[string]*anypb.Any{"fault": anyOf(t, f)}
		if onRoute {
			rc.VirtualHosts[0].Routes[0].TypedPerFilterConfig = override
		} else {
			rc.VirtualHosts[0].TypedPerFilterConfig = override
		}
		res[resource.RouteType] = []types.Resource{rc}
		cp.set(t, version, res)
	}
	// measure is the share of 2,000 calls (8 callers) that fail with
	// the injected abort; another error fails the test.
	measure := func(ctx context.Context) float64 {
		var aborted, calls atomic.Int64
		var other atomic.Value
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 250 {
					calls.Add(1)
					if _, err := c.Who(ctx, "x"); err != nil {
						if strings.Contains(err.Error(), "RPC terminated due to fault injection") && kernel.CodeOf(err) == kernel.CodeNetwork {
							aborted.Add(1)
						} else {
							other.Store(err)
						}
					}
				}
			})
		}
		wg.Wait()
		if err := other.Load(); err != nil {
			t.Fatalf("a call failed otherwise: %v", err)
		}
		return float64(aborted.Load()) / float64(calls.Load())
	}
	// 25% of the calls aborted with UNAVAILABLE (weft's network code).
	setFault("2", true, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14},
		Percentage: &typev3.FractionalPercent{Numerator: 25, Denominator: typev3.FractionalPercent_HUNDRED}}})
	deadline = time.Now().Add(10 * time.Second)
	share := measure(ctx)
	for share == 0 && time.Now().Before(deadline) {
		share = measure(ctx)
	}
	share = measure(ctx)
	t.Logf("abort 25%% UNAVAILABLE (route override): %.1f%% of 2,000 calls aborted", 100*share)
	if share < 0.20 || share > 0.30 {
		t.Fatalf("%.1f%% aborted, want 25%% ± 5", 100*share)
	}

	// Aborts the call's headers ask for (virtual host override); the
	// calls without the header go through.
	setFault("3", false, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100}}})
	asks := kernel.WithAttachments(ctx, map[string]any{headerAbortGRPCStatus: "8"})
	deadline = time.Now().Add(10 * time.Second)
	for {
		// Until the new routes come, the route's 25% abort (status 14)
		// may still meet the call.
		_, err := c.Who(asks, "x")
		if err != nil && strings.Contains(err.Error(), "fault injection (gRPC status 8)") {
			if kernel.CodeOf(err) != kernel.CodeLimitExceeded {
				t.Fatalf("x-envoy-fault-abort-grpc-request: 8 gave %v; want RESOURCE_EXHAUSTED (limit exceeded)", err)
			}
			t.Logf("header abort: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the header abort was not applied: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if share := measure(ctx); share != 0 {
		t.Fatalf("calls without the header aborted: %.1f%%", 100*share)
	}

	// A fixed delay of 150 ms on every call.
	setFault("4", true, &faultv3.HTTPFault{Delay: &commonfaultv3.FaultDelay{
		FaultDelaySecifier: &commonfaultv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(150 * time.Millisecond)},
		Percentage:         &typev3.FractionalPercent{Numerator: 100}}})
	deadline = time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		_, err := c.Who(ctx, "x")
		if took := time.Since(start); err == nil && took >= 150*time.Millisecond {
			t.Logf("fixed delay 150ms: the call took %v", took.Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delay was not applied")
		}
	}
}

// TestHTTPFiltersAsGRPCGo: the connection manager's filters are read as
// grpc-go reads a client's, with its texts.
func TestHTTPFiltersAsGRPCGo(t *testing.T) {
	router := &hcmv3.HttpFilter{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}}
	fault := &hcmv3.HttpFilter{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &faultv3.HTTPFault{
		Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 503}, Percentage: &typev3.FractionalPercent{Numerator: 1}}})}}
	unknown := &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &durationpb.Duration{})}}
	fs, err := httpFilters([]*hcmv3.HttpFilter{fault, router})
	if err != nil || len(fs) != 1 || fs[0].Fault.AbortCode != kernel.GRPCUnavailable || fs[0].Fault.AbortNum != 1 {
		t.Fatalf("fault then router: %+v, %v", fs, err)
	}
	for _, tc := range []struct {
		fs   []*hcmv3.HttpFilter
		want string
	}{
		{nil, "http filters list is empty"},
		{[]*hcmv3.HttpFilter{router, fault}, `http filter "router" is a terminal filter but it is not last in the filter chain`},
		{[]*hcmv3.HttpFilter{fault}, `http filter "fault" is not a terminal filter`},
		{[]*hcmv3.HttpFilter{fault, fault, router}, `duplicate filter name "fault"`},
		{[]*hcmv3.HttpFilter{unknown, router}, `no filter implementation found for "type.googleapis.com/google.protobuf.Duration"`},
	} {
		if _, err := httpFilters(tc.fs); err == nil || err.Error() != tc.want {
			t.Errorf("%d filters: %v, want %q", len(tc.fs), err, tc.want)
		}
	}
	optional := proto.Clone(unknown).(*hcmv3.HttpFilter)
	optional.IsOptional = true
	if fs, err := httpFilters([]*hcmv3.HttpFilter{optional, router}); err != nil || len(fs) != 0 {
		t.Errorf("an optional unknown filter: %+v, %v; want it skipped", fs, err)
	}
	var active atomic.Int64
	zero := &Fault{HasMax: true, MaxActive: 0, AbortCode: 14, AbortNum: 100, AbortDen: 100}
	if zero.active() {
		t.Error("max_active_faults 0 is active")
	}
	one := &Fault{HasMax: true, MaxActive: 1, AbortCode: 14, AbortNum: 100, AbortDen: 100}
	active.Store(1) // one call faulted now
	if end, err := one.inject(context.Background(), kernel.NewInvocation("m"), &active); end || err != nil {
		t.Errorf("past max_active_faults the call was faulted: %v %v", end, err)
	}
}
