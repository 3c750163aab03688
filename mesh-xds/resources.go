package xds

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/weftrpc/weft/kernel"
)

// The resource types weft asks for, and the order a request for each is
// sent in when several are due (clusters and endpoints before the
// listeners and routes that use them: make before break).
const (
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	hcmType      = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)

var typeOrder = []string{ClusterType, EndpointType, ListenerType, RouteType}

type resourceType struct {
	url         string
	decode      func(*anypb.Any) (string, any, error)
	allRequired bool
}

// resourceTypes are the types weft decodes; certs are the bootstrap's
// certificate provider instances, which a secured cluster must name.
func resourceTypes(certs map[string]CertificateProvider) []resourceType {
	return []resourceType{
		{ListenerType, func(a *anypb.Any) (string, any, error) { return decodeListener(a, certs) }, true},
		{RouteType, decodeRoute, false},
		{ClusterType, func(a *anypb.Any) (string, any, error) { return decodeCluster(a, certs) }, true},
		{EndpointType, decodeEndpoints, false},
	}
}

// Listener is what a consumer takes of a client listener (gRFC A27): the
// route configuration, by name (RDS) or inline, and the default timeout.
type Listener struct {
	RouteConfigName string
	Inline          *RouteConfig
	// MaxStreamDuration is the HTTP connection manager's default route
	// timeout (A31); 0: none.
	MaxStreamDuration time.Duration
	// Filters are its HTTP fault filters, in order (A33).
	Filters []HTTPFilter
}

// RouteConfig is a route configuration's virtual hosts.
type RouteConfig struct {
	Name         string
	VirtualHosts []VirtualHost
}

// VirtualHost is a set of routes for the domains it serves.
type VirtualHost struct {
	Name    string
	Domains []string
	Routes  []Route
	// Retry is the virtual host's retry policy, for routes without one
	// (A44); nil: none.
	Retry *RetryConfig
	// Faults override the listener's fault filters, by filter name (A33).
	Faults map[string]*Fault
}

// Route is one route: the first whose match a call meets decides its
// cluster (A28).
type Route struct {
	Prefix, Path  string
	Regex         *regexp.Regexp
	CaseSensitive bool
	Headers       []HeaderMatch
	// Fraction of calls (per million) the route takes; 1,000,000: all.
	Fraction uint32
	// Clusters the route sends to, by weight (one with weight 1 for a
	// plain cluster action).
	Clusters []WeightedCluster
	// Timeout is the route's max_stream_duration (A31), when HasTimeout:
	// grpc_timeout_header_max if set, else max_stream_duration; 0 is no
	// timeout. Without one the listener's default applies.
	Timeout    time.Duration
	HasTimeout bool
	// Retry is the route's retry policy (A44); nil: the virtual host's.
	Retry *RetryConfig
	// Faults override the virtual host's and the listener's fault filters
	// (A33).
	Faults map[string]*Fault
}

// RetryConfig is an xDS retry policy as gRPC takes it (gRFC A44): the
// status codes retried (of cancelled, deadline-exceeded, internal,
// resource-exhausted, unavailable; others are ignored), the retries, and
// the backoff. No supported code: no retries.
type RetryConfig struct {
	On                      map[int]bool // gRPC status codes
	NumRetries              uint32
	BackoffBase, BackoffMax time.Duration
}

// HeaderMatch matches one header (an attachment in weft's terms).
type HeaderMatch struct {
	Name                            string
	Exact, Prefix, Suffix, Contains string
	Regex                           *regexp.Regexp
	Present                         *bool
	RangeStart, RangeEnd            int64
	Kind                            string // exact, prefix, suffix, contains, regex, present, range
	Invert                          bool
}

// WeightedCluster is one destination of a route.
type WeightedCluster struct {
	Name   string
	Weight uint32
	// Faults override the route's fault filters for the calls sent to
	// this cluster (A33).
	Faults map[string]*Fault
}

// Cluster is what weft takes of a cluster (EDS only).
type Cluster struct {
	Name, EDSName string
	// LBPolicy is the load balancer weft maps it to: roundrobin,
	// consistenthash (RING_HASH) or leastactive (LEAST_REQUEST).
	LBPolicy string
	// MaxRequests is the circuit breaker's max_requests of the default
	// priority (A32): 1024 when unset.
	MaxRequests uint32
	// Security is the cluster's TLS (its UpstreamTlsContext); nil: plain.
	Security *SecurityConfig
	// Outlier is the cluster's outlier_detection as weft's outlier keys
	// (cluster.KeyOutlier...); nil: none.
	Outlier map[string]string
}

// Endpoints are a cluster's localities by priority.
type Endpoints struct {
	Localities []LocalityEndpoints
}

// LocalityEndpoints are the endpoints of one locality.
type LocalityEndpoints struct {
	Locality  Locality
	Weight    uint32
	Priority  uint32
	Endpoints []Endpoint
}

// Endpoint is one address a cluster's calls may go to.
type Endpoint struct {
	Host    string
	Port    uint32
	Weight  uint32
	Healthy bool // HEALTHY or UNKNOWN
}

// Bounds on what one resource may hold: a control plane is trusted less
// than that.
const (
	maxVirtualHosts = 10_000
	maxRoutes       = 10_000
	maxDomains      = 10_000
	maxHeaders      = 100
	maxEndpoints    = 100_000
	maxRegex        = 4096
)

func decodeListener(a *anypb.Any, certs map[string]CertificateProvider) (string, any, error) {
	var l listenerv3.Listener
	if err := a.UnmarshalTo(&l); err != nil {
		return "", nil, fmt.Errorf("failed to unmarshal resource: %v", err)
	}
	name := l.GetName()
	if name == "" {
		return "", nil, fmt.Errorf("a listener without a name")
	}
	api := l.GetApiListener().GetApiListener()
	if api == nil {
		if l.GetAddress() != nil {
			// A server's inbound listener (A36).
			sl, err := serverListener(&l, certs)
			return name, sl, err
		}
		return name, nil, fmt.Errorf("no api_listener field in the listener: weft is a proxyless client (istiod serves those to nodes with GENERATOR: grpc metadata)")
	}
	if api.GetTypeUrl() != hcmType {
		return name, nil, fmt.Errorf("unexpected http connection manager resource type: %q", api.GetTypeUrl())
	}
	var hcm hcmv3.HttpConnectionManager
	if err := api.UnmarshalTo(&hcm); err != nil {
		return name, nil, fmt.Errorf("failed to unmarshal api_listener: %v", err)
	}
	out := &Listener{MaxStreamDuration: hcm.GetCommonHttpProtocolOptions().GetMaxStreamDuration().AsDuration()}
	filters, err := httpFilters(hcm.GetHttpFilters())
	if err != nil {
		return name, nil, err
	}
	out.Filters = filters
	switch rs := hcm.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		src := rs.Rds.GetConfigSource()
		if src.GetAds() == nil && src.GetSelf() == nil {
			return name, nil, fmt.Errorf("LDS's RDS configSource is not ADS or Self: %v", src)
		}
		if out.RouteConfigName = rs.Rds.GetRouteConfigName(); out.RouteConfigName == "" {
			return name, nil, fmt.Errorf("empty route_config_name in the listener's rds")
		}
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rc, err := routeConfig(rs.RouteConfig)
		if err != nil {
			return name, nil, err
		}
		out.Inline = rc
	default:
		return name, nil, fmt.Errorf("no RouteSpecifier: %T", rs)
	}
	return name, out, nil
}

func decodeRoute(a *anypb.Any) (string, any, error) {
	var rc routev3.RouteConfiguration
	if err := a.UnmarshalTo(&rc); err != nil {
		return "", nil, fmt.Errorf("failed to unmarshal resource: %v", err)
	}
	if rc.GetName() == "" {
		return "", nil, fmt.Errorf("a route configuration without a name")
	}
	out, err := routeConfig(&rc)
	return rc.GetName(), out, err
}

func routeConfig(rc *routev3.RouteConfiguration) (*RouteConfig, error) {
	if n := len(rc.GetVirtualHosts()); n > maxVirtualHosts {
		return nil, fmt.Errorf("%d virtual hosts, over weft's bound of %d", n, maxVirtualHosts)
	}
	out := &RouteConfig{Name: rc.GetName()}
	for _, vh := range rc.GetVirtualHosts() {
		if n := len(vh.GetDomains()); n > maxDomains {
			return nil, fmt.Errorf("virtual host %q: %d domains, over weft's bound of %d", vh.GetName(), n, maxDomains)
		}
		if n := len(vh.GetRoutes()); n > maxRoutes {
			return nil, fmt.Errorf("virtual host %q: %d routes, over weft's bound of %d", vh.GetName(), n, maxRoutes)
		}
		v := VirtualHost{Name: vh.GetName(), Domains: vh.GetDomains()}
		rc, err := retryConfig(vh.GetRetryPolicy())
		if err != nil {
			return nil, fmt.Errorf("virtual host %q: %v", vh.GetName(), err)
		}
		v.Retry = rc
		if v.Faults, err = faultOverrides(vh.GetTypedPerFilterConfig()); err != nil {
			return nil, fmt.Errorf("virtual host %q: %v", vh.GetName(), err)
		}
		for i, r := range vh.GetRoutes() {
			route, ok, err := decodeOneRoute(r)
			if err != nil {
				return nil, fmt.Errorf("virtual host %q route %d: %v", vh.GetName(), i, err)
			}
			if ok {
				v.Routes = append(v.Routes, route)
			}
		}
		out.VirtualHosts = append(out.VirtualHosts, v)
	}
	return out, nil
}

// decodeOneRoute decodes r; ok false for a route gRPC ignores (query
// parameter matchers, an unknown cluster specifier).
func decodeOneRoute(r *routev3.Route) (Route, bool, error) {
	m := r.GetMatch()
	out := Route{CaseSensitive: m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue(), Fraction: 1_000_000}
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		out.Prefix = p.Prefix
	case *routev3.RouteMatch_Path:
		out.Path = p.Path
	case *routev3.RouteMatch_SafeRegex:
		re, err := compileRegex(p.SafeRegex.GetRegex())
		if err != nil {
			return out, false, err
		}
		out.Regex = re
	default:
		return out, false, fmt.Errorf("unsupported path specifier %T", p)
	}
	if len(m.GetQueryParameters()) > 0 {
		return out, false, nil
	}
	if n := len(m.GetHeaders()); n > maxHeaders {
		return out, false, fmt.Errorf("%d header matchers, over weft's bound of %d", n, maxHeaders)
	}
	for _, h := range m.GetHeaders() {
		hm, err := headerMatch(h)
		if err != nil {
			return out, false, err
		}
		out.Headers = append(out.Headers, hm)
	}
	if f := m.GetRuntimeFraction().GetDefaultValue(); f != nil {
		out.Fraction = perMillion(f)
	}
	action := r.GetRoute()
	if action == nil {
		return out, false, nil
	}
	switch cs := action.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		if cs.Cluster == "" {
			return out, false, fmt.Errorf("empty cluster in the route action")
		}
		out.Clusters = []WeightedCluster{{Name: cs.Cluster, Weight: 1}}
	case *routev3.RouteAction_WeightedClusters:
		var total uint64
		for _, c := range cs.WeightedClusters.GetClusters() {
			w := c.GetWeight().GetValue()
			if w == 0 {
				continue
			}
			if c.GetName() == "" {
				return out, false, fmt.Errorf("a weighted cluster without a name")
			}
			total += uint64(w)
			faults, err := faultOverrides(c.GetTypedPerFilterConfig())
			if err != nil {
				return out, false, fmt.Errorf("weighted cluster %q: %v", c.GetName(), err)
			}
			out.Clusters = append(out.Clusters, WeightedCluster{Name: c.GetName(), Weight: w, Faults: faults})
		}
		if total > math.MaxUint32 {
			return out, false, fmt.Errorf("xds: total weight of clusters exceeds MaxUint32")
		}
		if len(out.Clusters) == 0 {
			return out, false, fmt.Errorf("route %q has no valid cluster in WeightedCluster action", r.GetName())
		}
	default:
		// cluster_header and others: gRPC ignores the route.
		return out, false, nil
	}
	if d := action.GetMaxStreamDuration(); d != nil {
		if h := d.GetGrpcTimeoutHeaderMax(); h != nil {
			out.Timeout, out.HasTimeout = h.AsDuration(), true
		} else if d.GetMaxStreamDuration() != nil {
			out.Timeout, out.HasTimeout = d.GetMaxStreamDuration().AsDuration(), true
		}
	}
	rc, err := retryConfig(action.GetRetryPolicy())
	if err != nil {
		return out, false, err
	}
	out.Retry = rc
	if out.Faults, err = faultOverrides(r.GetTypedPerFilterConfig()); err != nil {
		return out, false, err
	}
	return out, true, nil
}

// retryConfig is grpc-go's generateRetryConfig: its defaults (one retry,
// 25 ms base, max 10× base) and its error texts.
func retryConfig(rp *routev3.RetryPolicy) (*RetryConfig, error) {
	if rp == nil {
		return nil, nil
	}
	cfg := &RetryConfig{On: map[int]bool{}}
	for _, s := range strings.Split(rp.GetRetryOn(), ",") {
		switch strings.TrimSpace(strings.ToLower(s)) {
		case "cancelled":
			cfg.On[kernel.GRPCCanceled] = true
		case "deadline-exceeded":
			cfg.On[kernel.GRPCDeadlineExceeded] = true
		case "internal":
			cfg.On[kernel.GRPCInternal] = true
		case "resource-exhausted":
			cfg.On[kernel.GRPCResourceExhausted] = true
		case "unavailable":
			cfg.On[kernel.GRPCUnavailable] = true
		}
	}
	if rp.NumRetries == nil {
		cfg.NumRetries = 1
	} else if cfg.NumRetries = rp.GetNumRetries().GetValue(); cfg.NumRetries < 1 {
		return nil, fmt.Errorf("retry_policy.num_retries = %v; must be >= 1", cfg.NumRetries)
	}
	b := rp.GetRetryBackOff()
	if b == nil {
		cfg.BackoffBase = 25 * time.Millisecond
	} else if cfg.BackoffBase = b.GetBaseInterval().AsDuration(); cfg.BackoffBase <= 0 {
		return nil, fmt.Errorf("retry_policy.base_interval = %v; must be > 0", cfg.BackoffBase)
	}
	if m := b.GetMaxInterval(); m == nil {
		cfg.BackoffMax = 10 * cfg.BackoffBase
	} else if cfg.BackoffMax = m.AsDuration(); cfg.BackoffMax <= 0 {
		return nil, fmt.Errorf("retry_policy.max_interval = %v; must be > 0", cfg.BackoffMax)
	}
	if len(cfg.On) == 0 {
		return &RetryConfig{}, nil
	}
	return cfg, nil
}

func compileRegex(s string) (*regexp.Regexp, error) {
	if len(s) > maxRegex {
		return nil, fmt.Errorf("a regex of %d bytes, over weft's bound of %d", len(s), maxRegex)
	}
	// RE2 full match, as Envoy's safe_regex.
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("safe_regex %q: %v", s, err)
	}
	return re, nil
}

func headerMatch(h *routev3.HeaderMatcher) (HeaderMatch, error) {
	out := HeaderMatch{Name: strings.ToLower(h.GetName()), Invert: h.GetInvertMatch()}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		out.Kind, out.Exact = "exact", s.ExactMatch
	case *routev3.HeaderMatcher_PrefixMatch:
		out.Kind, out.Prefix = "prefix", s.PrefixMatch
	case *routev3.HeaderMatcher_SuffixMatch:
		out.Kind, out.Suffix = "suffix", s.SuffixMatch
	case *routev3.HeaderMatcher_ContainsMatch:
		out.Kind, out.Contains = "contains", s.ContainsMatch
	case *routev3.HeaderMatcher_SafeRegexMatch:
		re, err := compileRegex(s.SafeRegexMatch.GetRegex())
		if err != nil {
			return out, err
		}
		out.Kind, out.Regex = "regex", re
	case *routev3.HeaderMatcher_PresentMatch:
		p := s.PresentMatch
		out.Kind, out.Present = "present", &p
	case *routev3.HeaderMatcher_RangeMatch:
		out.Kind, out.RangeStart, out.RangeEnd = "range", s.RangeMatch.GetStart(), s.RangeMatch.GetEnd()
	case *routev3.HeaderMatcher_StringMatch:
		sm := s.StringMatch
		switch {
		case sm.GetExact() != "":
			out.Kind, out.Exact = "exact", sm.GetExact()
		case sm.GetPrefix() != "":
			out.Kind, out.Prefix = "prefix", sm.GetPrefix()
		case sm.GetSuffix() != "":
			out.Kind, out.Suffix = "suffix", sm.GetSuffix()
		case sm.GetContains() != "":
			out.Kind, out.Contains = "contains", sm.GetContains()
		case sm.GetSafeRegex() != nil:
			re, err := compileRegex(sm.GetSafeRegex().GetRegex())
			if err != nil {
				return out, err
			}
			out.Kind, out.Regex = "regex", re
		default:
			return out, fmt.Errorf("header %q: an empty string matcher", h.GetName())
		}
	default:
		return out, fmt.Errorf("header %q: unsupported matcher %T", h.GetName(), s)
	}
	return out, nil
}

func perMillion(f *typev3.FractionalPercent) uint32 {
	n := uint64(f.GetNumerator())
	switch f.GetDenominator() {
	case typev3.FractionalPercent_HUNDRED:
		n *= 10_000
	case typev3.FractionalPercent_TEN_THOUSAND:
		n *= 100
	}
	return uint32(min(n, 1_000_000))
}

func decodeCluster(a *anypb.Any, certs map[string]CertificateProvider) (string, any, error) {
	var c clusterv3.Cluster
	if err := a.UnmarshalTo(&c); err != nil {
		return "", nil, fmt.Errorf("failed to unmarshal resource: %v", err)
	}
	name := c.GetName()
	if name == "" {
		return "", nil, fmt.Errorf("a cluster without a name")
	}
	if c.GetType() != clusterv3.Cluster_EDS {
		return name, nil, fmt.Errorf("unsupported cluster type (%v, %v) in response: weft takes EDS clusters", c.GetType(), c.GetClusterType())
	}
	src := c.GetEdsClusterConfig().GetEdsConfig()
	if src.GetAds() == nil && src.GetSelf() == nil {
		return name, nil, fmt.Errorf("CDS's EDS config source is not ADS or Self: %v", src)
	}
	out := &Cluster{Name: name, EDSName: c.GetEdsClusterConfig().GetServiceName(), MaxRequests: 1024}
	if out.EDSName == "" {
		out.EDSName = name
	}
	switch c.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN:
		out.LBPolicy = "roundrobin"
	case clusterv3.Cluster_RING_HASH:
		out.LBPolicy = "consistenthash"
	case clusterv3.Cluster_LEAST_REQUEST:
		if cc := c.GetLeastRequestLbConfig().GetChoiceCount(); cc != nil && cc.GetValue() < 2 {
			return name, nil, fmt.Errorf("Cluster_LeastRequestLbConfig.ChoiceCount must be >= 2, got: %v", cc.GetValue())
		}
		out.LBPolicy = "leastactive"
	default:
		return name, nil, fmt.Errorf("unexpected lbPolicy %v in response", c.GetLbPolicy())
	}
	var err error
	if out.Outlier, err = outlierParams(&c); err != nil {
		return name, nil, err
	}
	sec, err := clusterSecurity(&c, certs)
	if err != nil {
		return name, nil, err
	}
	out.Security = sec
	for _, t := range c.GetCircuitBreakers().GetThresholds() {
		if t.GetPriority() == corev3.RoutingPriority_DEFAULT {
			if m := t.GetMaxRequests(); m != nil {
				out.MaxRequests = m.GetValue()
			}
			break
		}
	}
	return name, out, nil
}

func decodeEndpoints(a *anypb.Any) (string, any, error) {
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return "", nil, fmt.Errorf("failed to unmarshal resource: %v", err)
	}
	name := cla.GetClusterName()
	if name == "" {
		return "", nil, fmt.Errorf("a cluster load assignment without a cluster_name")
	}
	out := &Endpoints{}
	priorities := map[uint32]bool{}
	seen := map[string]bool{}
	total := 0
	for _, l := range cla.GetEndpoints() {
		if l.GetLocality() == nil {
			return name, nil, fmt.Errorf("a locality without its locality field")
		}
		w := l.GetLoadBalancingWeight().GetValue()
		if w == 0 {
			continue // gRPC ignores a locality of weight 0
		}
		le := LocalityEndpoints{Locality: Locality{Region: l.GetLocality().GetRegion(), Zone: l.GetLocality().GetZone(), SubZone: l.GetLocality().GetSubZone()},
			Weight: w, Priority: l.GetPriority()}
		priorities[l.GetPriority()] = true
		for _, e := range l.GetLbEndpoints() {
			if total++; total > maxEndpoints {
				return name, nil, fmt.Errorf("over weft's bound of %d endpoints", maxEndpoints)
			}
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil {
				return name, nil, fmt.Errorf("an endpoint without a socket address")
			}
			addr := fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
			if seen[addr] {
				return name, nil, fmt.Errorf("duplicate endpoint with the same address %s", addr)
			}
			seen[addr] = true
			ew := uint32(1)
			if lw := e.GetLoadBalancingWeight(); lw != nil {
				if lw.GetValue() == 0 {
					return name, nil, fmt.Errorf("EDS response contains an endpoint with zero weight: %s", addr)
				}
				ew = lw.GetValue()
			}
			hs := e.GetHealthStatus()
			le.Endpoints = append(le.Endpoints, Endpoint{Host: sa.GetAddress(), Port: sa.GetPortValue(), Weight: ew,
				Healthy: hs == corev3.HealthStatus_HEALTHY || hs == corev3.HealthStatus_UNKNOWN})
		}
		out.Localities = append(out.Localities, le)
	}
	for p := range uint32(len(priorities)) {
		if !priorities[p] {
			return name, nil, fmt.Errorf("priority %v missing (with different priorities received)", p)
		}
	}
	return name, out, nil
}

// equalResource tells whether a new value of a resource is the old one,
// so that a response resending it does not wake its watchers.
func equalResource(a, b any) bool { return reflect.DeepEqual(a, b) }
