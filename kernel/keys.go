package kernel

// URL parameter names, spelled as Dubbo spells them so that a Dubbo user's
// configuration means the same thing here.
const (
	KeyInterface   = "interface"
	KeyGroup       = "group"
	KeyVersion     = "version"
	KeyMethods     = "methods"
	KeySide        = "side"
	KeyApplication = "application"
	KeyTimeout     = "timeout"
	KeyRetries     = "retries"
	KeyCluster     = "cluster"
	KeyLoadBalance = "loadbalance"
	KeyExecutes    = "executes"
	KeyActives     = "actives"
	KeyWeight      = "weight"
	KeyWarmup      = "warmup"
	KeyTimestamp   = "timestamp"
	KeyThreads     = "threads"
	KeyPayload     = "payload"
	// KeySerialization names the serialization a call is written in
	// (Dubbo's `serialization`: hessian2 by default).
	KeySerialization = "serialization"
	KeyAccessLog     = "accesslog"
	KeyToken         = "token"
	KeyPath          = "path"
	KeyDubbo         = "dubbo"

	// KeyServiceFilter holds a provider's filter list; KeyReferenceFilter a
	// consumer's. They are the keys of Loader.Activate for filter chains.
	KeyServiceFilter   = "service.filter"
	KeyReferenceFilter = "reference.filter"

	SideProvider = "provider"
	SideConsumer = "consumer"

	// GroupProvider and GroupConsumer are the activation groups of filters.
	GroupProvider = "provider"
	GroupConsumer = "consumer"

	// DefaultTimeoutMillis is Dubbo's default call timeout.
	DefaultTimeoutMillis = 1000
	// DefaultRetries is Dubbo's default number of failover retries.
	DefaultRetries = 2

	// MethodEcho is Dubbo's built-in liveness method answered by the echo filter.
	MethodEcho = "$echo"
)
