package extension

import "time"

// The attachments of the two load reports that load balancers decide on,
// spelled as their models spell them so that Java Dubbo and dubbo-go peers
// take part. The filters that carry them (plugins/filter/adaptivelb,
// plugins/filter/adaptivesvc) and the balancers that read them (cluster's
// adaptive and p2c) meet here.
const (
	// KeyAdaptiveLoad is Java's ADAPTIVE_LOADBALANCE_ATTACHMENT_KEY: a
	// request carrying it (any non-empty value; Java sends
	// AdaptiveLoadRequest) asks for the provider's load, which comes back
	// under the same key as "curTime:<epoch ms>,load:<load average ×
	// 100 / CPUs>".
	KeyAdaptiveLoad     = "lb_adaptive"
	AdaptiveLoadRequest = "mem,load"
	// dubbo-go's adaptive service: a request with KeyAdaptiveService "1"
	// asks a provider running a concurrency limiter how many more calls it
	// would take now (KeyAdaptiveRemaining) and how many it runs
	// (KeyAdaptiveInflight), as decimal strings.
	KeyAdaptiveService   = "adaptive-service.enabled"
	KeyAdaptiveRemaining = "adaptive-service.remaining"
	KeyAdaptiveInflight  = "adaptive-service.inflight"
)

// LoadReports is where a consumer keeps what it learns of each provider's
// load (keys: provider URLs, an invoker's URL().String()), for the load
// balancers that read it. The consumer filter that carries the reports
// writes it; cluster.AdaptiveMetrics is the App's.
type LoadReports interface {
	// Picked counts a call sent to provider.
	Picked(provider string)
	// Failed counts a call to provider that got no answer.
	Failed(provider string)
	// Answered counts an answer that took rt, with the provider's
	// KeyAdaptiveLoad report ("" when it sent none).
	Answered(provider, report string, rt time.Duration)
	// SetRemaining takes in a KeyAdaptiveRemaining report for method.
	SetRemaining(provider, method string, remaining, inflight int64)
}
