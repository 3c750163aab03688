package dubbogo

import (
	"context"
	"maps"
	"strings"
	"sync"

	getty "github.com/apache/dubbo-getty"
	hessian "github.com/apache/dubbo-go-hessian2"
	gostlog "github.com/dubbogo/gost/log/logger"

	// dubbo-go registers its plugins from init functions: import exactly the
	// ones the direct-URL dubbo path needs (the default provider filter chain
	// echo,token,accesslog,tps,generic_service,execute,pshutdown; the consumer
	// chain cshutdown; the failfast cluster; random load balancing; the
	// default proxy factory; the dubbo protocol and its codec).
	_ "dubbo.apache.org/dubbo-go/v3/cluster/cluster/failfast"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/loadbalance/random"
	"dubbo.apache.org/dubbo-go/v3/common/extension"
	"dubbo.apache.org/dubbo-go/v3/filter"
	_ "dubbo.apache.org/dubbo-go/v3/filter/accesslog"
	_ "dubbo.apache.org/dubbo-go/v3/filter/echo"
	_ "dubbo.apache.org/dubbo-go/v3/filter/exec_limit"
	_ "dubbo.apache.org/dubbo-go/v3/filter/generic"
	_ "dubbo.apache.org/dubbo-go/v3/filter/graceful_shutdown"
	// otelServerTrace and otelClientTrace, for WithTracing and
	// WithProviderTracing; they trace with otel's global provider.
	_ "dubbo.apache.org/dubbo-go/v3/filter/otel/trace"
	_ "dubbo.apache.org/dubbo-go/v3/filter/token"
	_ "dubbo.apache.org/dubbo-go/v3/filter/tps"
	"dubbo.apache.org/dubbo-go/v3/protocol/base"
	_ "dubbo.apache.org/dubbo-go/v3/protocol/dubbo"
	"dubbo.apache.org/dubbo-go/v3/protocol/result"
	_ "dubbo.apache.org/dubbo-go/v3/proxy/proxy_factory"
	// The ZooKeeper registry (WithProviderZookeeper, zookeeper:// clients):
	// the registry protocol, the consumer's registry directory and
	// dubbo-go's ZooKeeper registry.
	_ "dubbo.apache.org/dubbo-go/v3/registry/directory"
	_ "dubbo.apache.org/dubbo-go/v3/registry/protocol"
	_ "dubbo.apache.org/dubbo-go/v3/registry/zookeeper"
	// And dubbo-go's Nacos registry (WithProviderNacos, nacos:// clients).
	_ "dubbo.apache.org/dubbo-go/v3/registry/nacos"
	gettyremoting "dubbo.apache.org/dubbo-go/v3/remoting/getty"
)

// DefaultLogLevel is the level SetLogLevel applies on first use of the package.
const DefaultLogLevel = "error"

// MaxMsgLen is the largest dubbo frame body the provider and the consumers
// accept or send: 8 MiB, Java Dubbo's default payload limit. dubbo-go's own
// default (getty's max-msg-len) is 1024000 bytes, too small for a 1 MiB string.
// setup sets it process-wide with getty.SetServerConfig and SetClientConf:
// dubbo-go's per-protocol params (protocol.WithParams) do not reach getty on
// the new server API, and the client API has no way to pass them at all.
const MaxMsgLen = 8 << 20

var setupOnce sync.Once

// setup does the process-wide registrations once (no init functions: the
// repository forbids them).
func setup() {
	setupOnce.Do(func() {
		SetLogLevel(DefaultLogLevel)
		hessian.RegisterPOJO(&User{})
		sc := gettyremoting.GetDefaultServerConfig()
		sc.GettySessionParam.MaxMsgLen = MaxMsgLen
		gettyremoting.SetServerConfig(*sc)
		cc := gettyremoting.GetDefaultClientConfig()
		cc.GettySessionParam.MaxMsgLen = MaxMsgLen
		gettyremoting.SetClientConf(*cc)
		extension.SetFilter(attachmentFilterName, func() filter.Filter { return attachmentFilter{} })
	})
}

// SetLogLevel sets the level of dubbo-go's logger (gost/zap): "debug",
// "info", "warn" or "error". getty, its transport, has its own logger, which
// logs every connection close with a stack trace at warn or error level; it
// is kept quieter: "warn" gives getty "error", and "error" silences it (real
// transport failures still surface as call errors and in dubbo-go's log).
func SetLogLevel(level string) {
	gostlog.SetLoggerLevel(level)
	gl := getty.LoggerLevelDPanic
	switch strings.ToLower(level) {
	case "debug":
		gl = getty.LoggerLevelDebug
	case "info":
		gl = getty.LoggerLevelInfo
	case "warn":
		gl = getty.LoggerLevelError
	}
	_ = getty.SetLoggerLevel(gl)
}

const attachmentFilterName = "weft-interop-attachments"

type attachmentsKey struct{}

// callAttachments carries one call's attachments through dubbo-go's consumer
// filter chain.
type callAttachments struct {
	req  map[string]any
	resp map[string]any
}

// attachmentFilter is a dubbo-go consumer filter: it sits between the cluster
// invoker and the DubboInvoker, so what it sets on the invocation is encoded
// into the request, and the result it sees carries the decoded response
// attachments.
type attachmentFilter struct{}

func (attachmentFilter) Invoke(ctx context.Context, invoker base.Invoker, inv base.Invocation) result.Result {
	ca, _ := ctx.Value(attachmentsKey{}).(*callAttachments)
	if ca != nil {
		for k, v := range ca.req {
			inv.SetAttachment(k, v)
		}
	}
	res := invoker.Invoke(ctx, inv)
	if ca != nil && res != nil {
		ca.resp = maps.Clone(res.Attachments())
	}
	return res
}

func (attachmentFilter) OnResponse(_ context.Context, res result.Result, _ base.Invoker, _ base.Invocation) result.Result {
	return res
}
