package xds

import (
	"fmt"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/cluster"
)

// outlierParams maps a cluster's outlier_detection (gRFC A50) onto weft's
// outlier detection (cluster.KeyOutlier...), which watches each cluster's
// providers apart (cluster.KeyOutlierGroup): interval, base and max
// ejection time, max ejection percent; the success rate algorithm (stdev
// factor, minimum hosts, request volume), on unless
// enforcing_success_rate is 0 (its default is 100); and the failure
// percentage algorithm (threshold, minimum hosts, request volume), on when
// enforcing_failure_percentage is above 0 (its default is 0), as in gRPC,
// though weft ejects every provider an algorithm finds rather than the
// enforcing share of them. consecutive_5xx, which gRPC ignores, is
// Envoy's and weft's too: it applies when set. A value gRPC refuses is
// refused with its text; nil: no outlier_detection.
func outlierParams(c *clusterv3.Cluster) (map[string]string, error) {
	od := c.GetOutlierDetection()
	if od == nil {
		return nil, nil
	}
	p := map[string]string{cluster.KeyOutlier: "true", cluster.KeyOutlierGroup: c.GetName()}
	dur := func(field string, d *durationpb.Duration, key string) error {
		if d == nil {
			return nil
		}
		if err := d.CheckValid(); err != nil {
			return fmt.Errorf("outlier_detection.%s is invalid with error: %v", field, err)
		}
		v := d.AsDuration()
		if v < 0 {
			return fmt.Errorf("outlier_detection.%s = %v; must be >= 0", field, v)
		}
		// weft counts whole milliseconds of at least 1.
		p[key] = strconv.FormatInt(max(v.Milliseconds(), 1), 10)
		return nil
	}
	pct := func(field string, w *wrapperspb.UInt32Value, key string) error {
		if w == nil {
			return nil
		}
		if w.GetValue() > 100 {
			return fmt.Errorf("outlier_detection.%s = %v; must be <= 100", field, w.GetValue())
		}
		if key != "" {
			p[key] = strconv.FormatUint(uint64(w.GetValue()), 10)
		}
		return nil
	}
	for _, err := range []error{
		dur("interval", od.GetInterval(), cluster.KeyOutlierInterval),
		dur("base_ejection_time", od.GetBaseEjectionTime(), cluster.KeyOutlierBaseEjection),
		dur("max_ejection_time", od.GetMaxEjectionTime(), cluster.KeyOutlierMaxEjection),
		pct("max_ejection_percent", od.GetMaxEjectionPercent(), cluster.KeyOutlierMaxPercent),
		pct("enforcing_success_rate", od.GetEnforcingSuccessRate(), ""),
		pct("failure_percentage_threshold", od.GetFailurePercentageThreshold(), ""),
		pct("enforcing_failure_percentage", od.GetEnforcingFailurePercentage(), ""),
	} {
		if err != nil {
			return nil, err
		}
	}
	// Success rate: on unless enforcing_success_rate is 0.
	p[cluster.KeyOutlierSuccessStdev] = "0"
	if e := od.GetEnforcingSuccessRate(); e == nil || e.GetValue() > 0 {
		p[cluster.KeyOutlierSuccessStdev] = strconv.FormatUint(uint64(orU32(od.GetSuccessRateStdevFactor(), 1900)), 10)
		p[cluster.KeyOutlierSuccessMinHosts] = strconv.FormatUint(uint64(max(orU32(od.GetSuccessRateMinimumHosts(), 5), 1)), 10)
		p[cluster.KeyOutlierSuccessVolume] = strconv.FormatUint(uint64(max(orU32(od.GetSuccessRateRequestVolume(), 100), 1)), 10)
	}
	// Failure percentage: off unless enforced (gRPC's default 0).
	p[cluster.KeyOutlierFailurePercent] = "0"
	if od.GetEnforcingFailurePercentage().GetValue() > 0 {
		p[cluster.KeyOutlierFailurePercent] = strconv.FormatUint(uint64(orU32(od.GetFailurePercentageThreshold(), 85)), 10)
		p[cluster.KeyOutlierFailureMinHosts] = strconv.FormatUint(uint64(max(orU32(od.GetFailurePercentageMinimumHosts(), 5), 1)), 10)
		p[cluster.KeyOutlierFailureVolume] = strconv.FormatUint(uint64(max(orU32(od.GetFailurePercentageRequestVolume(), 50), 1)), 10)
	}
	// Consecutive failures: gRPC's proxyless clients ignore them; weft
	// applies consecutive_5xx when the cluster sets it (Envoy's meaning).
	p[cluster.KeyOutlierConsecutive] = "0"
	if n, e := od.GetConsecutive_5Xx(), od.GetEnforcingConsecutive_5Xx(); n != nil && (e == nil || e.GetValue() > 0) {
		p[cluster.KeyOutlierConsecutive] = strconv.FormatUint(uint64(n.GetValue()), 10)
	}
	return p, nil
}

func orU32(w *wrapperspb.UInt32Value, def uint32) uint32 {
	if w == nil {
		return def
	}
	return w.GetValue()
}
