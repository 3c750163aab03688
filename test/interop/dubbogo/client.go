package dubbogo

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/global"
	"dubbo.apache.org/dubbo-go/v3/graceful_shutdown"
	"dubbo.apache.org/dubbo-go/v3/protocol/base"
	dubboproto "dubbo.apache.org/dubbo-go/v3/protocol/dubbo"
)

// DefaultTimeout bounds every call that has no shorter context deadline.
const DefaultTimeout = 3 * time.Second

// clientIDParam tags the URL of each Client's invoker so Close can find it.
const clientIDParam = "weft.interop.client"

var (
	// referMu serialises dubbo-go's Refer and our scan of the dubbo protocol's
	// invoker list, which dubbo-go appends to without a lock; it also guards
	// liveClients.
	referMu      sync.Mutex
	lastClientID atomic.Int64
	// liveClients counts open Clients per host:port: dubbo-go shares one
	// connection per address among them.
	liveClients = map[string]int{}
)

// Client is a dubbo-go consumer of EchoService at one direct URL. It is safe
// for concurrent use. dubbo-go shares one TCP connection per address among all
// its consumers in the process.
type Client struct {
	url     string
	id      string
	timeout time.Duration
	generic bool
	tracing bool
	zk      *zkRegistry // set: find the provider in ZooKeeper, not by url
	conn    *client.Connection
	closed  sync.Once
	isDone  atomic.Bool
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("dubbogo: client closed")

// ClientOption configures NewClient.
type ClientOption func(*Client)

// WithTimeout sets the per-call timeout (default DefaultTimeout).
func WithTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.timeout = d }
}

// WithGeneric makes the client a generic reference, as dubbo-go's
// `generic: true`: dubbo-go's generic filter turns each call of a method into
// $invoke(method, types, args) with the arguments generalised to maps, sent as
// a []hessian.Object (a typed list), and the generic=true attachment; results
// come back in generic form (maps for POJOs).
func WithGeneric() ClientOption {
	return func(c *Client) { c.generic = true }
}

// WithTracing turns on dubbo-go's OpenTelemetry client filter
// (otelClientTrace), as `otel.tracing.enable: true` does in a dubbo-go
// consumer's config: a client span per call, the W3C trace context sent as
// attachments. It traces with otel's global TracerProvider and propagator,
// which the test sets (otel.SetTracerProvider, otel.SetTextMapPropagator)
// before NewClient.
func WithTracing() ClientOption {
	return func(c *Client) { c.tracing = true }
}

// otelOn is dubbo-go's otel config with tracing enabled; in the new API it
// only adds the otel filters to the chains (the exporter is the global
// provider's business).
func otelOn() *global.OtelConfig {
	on := true
	return &global.OtelConfig{TracingConfig: &global.OtelTraceConfig{Enable: &on}}
}

// NewClient connects a dubbo-go consumer to url, e.g. "dubbo://127.0.0.1:20000"
// (the scheme may be omitted). dubbo-go dials at once, so the provider must be
// listening. With a ZooKeeper URL, zookeeper://host:port?group=G, the
// consumer subscribes in that registry (interface level, root /G, /dubbo
// without group) and calls the providers it lists; with a Nacos URL,
// nacos://host:port?namespace=NS, the same in that Nacos namespace.
func NewClient(url string, opts ...ClientOption) (*Client, error) {
	setup()
	var zkr *zkRegistry
	for _, scheme := range []string{"zookeeper://", "nacos://"} {
		rest, ok := strings.CutPrefix(url, scheme)
		if !ok {
			continue
		}
		addr, query, _ := strings.Cut(rest, "?")
		q, err := neturl.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("dubbogo: %q: %w", url, err)
		}
		zkr = &zkRegistry{address: addr, group: q.Get("group"), nacos: scheme == "nacos://", namespace: q.Get("namespace")}
		url = "dubbo://" + addr // names the client's shared-connection slot only
	}
	if !strings.Contains(url, "://") {
		url = "dubbo://" + url
	}
	if !strings.HasPrefix(url, "dubbo://") {
		return nil, fmt.Errorf("dubbogo: %q is not a dubbo:// URL", url)
	}
	c := &Client{
		url:     url,
		id:      strconv.FormatInt(lastClientID.Add(1), 10),
		timeout: DefaultTimeout,
		zk:      zkr,
	}
	for _, o := range opts {
		o(c)
	}
	if c.timeout <= 0 {
		return nil, errors.New("dubbogo: timeout must be positive")
	}
	referMu.Lock()
	defer referMu.Unlock()
	conn, err := dial(c)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	liveClients[hostPort(c.url)]++
	return c, nil
}

func dial(c *Client) (conn *client.Connection, err error) {
	// dubbo-go's Refer panics when it cannot connect (a nil invoker reaches
	// the filter chain builder).
	defer func() {
		if r := recover(); r != nil {
			conn, err = nil, fmt.Errorf("dubbogo: dubbo-go could not connect to %s (its Refer panicked: %v)", c.url, r)
		}
	}()
	opts := []client.ClientOption{
		client.WithClientProtocolDubbo(),
		client.WithClientSerialization(constant.Hessian2Serialization),
		// failover (the default) retries dubbo-protocol business errors.
		client.WithClientClusterFailFast(),
		client.WithClientRetries(0),
		client.WithClientRequestTimeout(c.timeout),
		client.WithClientFilter(attachmentFilterName),
		client.WithClientParam(clientIDParam, c.id),
		client.WithClientNoCheck(),
		client.SetClientTLS(nil),
		client.WithClientShutdown(graceful_shutdown.WithoutInternalSignal()),
	}
	if c.tracing {
		opts = append(opts, client.SetClientOtel(otelOn()))
	}
	if c.zk != nil {
		opts = append(opts, client.WithClientRegistry(c.zk.options()...))
	}
	cli, err := client.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dubbogo: new client: %w", err)
	}
	var refOpts []client.ReferenceOption
	if c.zk == nil {
		refOpts = append(refOpts, client.WithURL(c.url))
	}
	if c.generic {
		refOpts = append(refOpts, client.WithGeneric())
	}
	conn, err = cli.Dial(Interface, refOpts...)
	if err != nil {
		return nil, fmt.Errorf("dubbogo: dial %s: %w", c.url, err)
	}
	return conn, nil
}

// Echo calls echo(String).
func (c *Client) Echo(ctx context.Context, s string) (string, error) {
	var out string
	_, err := c.Invoke(ctx, "echo", []any{s}, &out, nil)
	return out, err
}

// EchoWithAttachments calls echo(String) sending the request attachments att
// and returns the response attachments. Against the dubbo-go provider they
// include "x-resp" = "resp-"+att["x-req"], plus every request attachment
// echoed back (see the package doc).
func (c *Client) EchoWithAttachments(ctx context.Context, s string, att map[string]any) (string, map[string]any, error) {
	var out string
	resp, err := c.Invoke(ctx, "echo", []any{s}, &out, att)
	return out, resp, err
}

// GetUser calls getUser(long).
func (c *Client) GetUser(ctx context.Context, id int64) (*User, error) {
	out := &User{}
	if _, err := c.Invoke(ctx, "getUser", []any{id}, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// Fail calls fail(String); against the dubbo-go provider it always returns an
// error whose message contains s.
func (c *Client) Fail(ctx context.Context, s string) error {
	_, err := c.Invoke(ctx, "fail", []any{s}, nil, nil)
	return err
}

// Invoke calls method on EchoService with args through dubbo-go's
// Connection.CallUnary, decoding the result into reply (a pointer; nil for a
// void method). att, if not nil, is sent as request attachments; the response
// attachments are returned (nil if the call failed before a response). The
// call times out after the client's timeout or the context's deadline,
// whichever is sooner; dubbo-go itself does not watch ctx.
func (c *Client) Invoke(ctx context.Context, method string, args []any, reply any, att map[string]any) (_ map[string]any, err error) {
	if c.isDone.Load() {
		// A retired dubbo-go invoker would still redial in its availability
		// check before refusing the call.
		return nil, ErrClosed
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			if left <= 0 {
				return nil, context.DeadlineExceeded
			}
			timeout = left
		}
	}
	if reply == nil {
		// DubboInvoker refuses a call without a reply holder.
		reply = new(any)
	}
	ca := &callAttachments{req: att}
	ctx = context.WithValue(ctx, attachmentsKey{}, ca)
	defer func() {
		// e.g. the failfast cluster dereferences nil when the connection
		// has been lost and no invoker is available.
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbogo: dubbo-go panicked calling %s: %v", method, r)
		}
	}()
	err = c.conn.CallUnary(ctx, args, reply, method,
		client.WithCallRequestTimeout(timeout),
		client.WithCallRetries(0),
	)
	return ca.resp, err
}

// Close retires this client's dubbo-go invoker. If it was the last open
// Client of its address, the connection dubbo-go shares per address is closed
// too, and Close returns once dubbo-go has reset it. Idempotent.
//
// dubbo-go's own DubboInvoker.Destroy is not used: closing the shared
// connection through it races inside dubbo-go (see closeSharedConnection).
// So the invoker is only marked destroyed, and dubbo-go's per-address
// ExchangeClient stays registered (a few hundred bytes) for the next Client.
func (c *Client) Close() {
	c.closed.Do(func() {
		c.isDone.Store(true)
		referMu.Lock()
		defer referMu.Unlock()
		loc := hostPort(c.url)
		liveClients[loc]--
		if liveClients[loc] <= 0 {
			delete(liveClients, loc)
			closeSharedConnection(loc)
		}
		// client.Connection has no Close: find the DubboInvoker that Refer
		// registered with the dubbo protocol, by the URL parameter we set.
		dp, ok := dubboproto.GetProtocol().(interface{ Invokers() []base.Invoker })
		if !ok {
			return
		}
		for _, inv := range dp.Invokers() {
			if inv == nil || inv.GetURL() == nil || inv.GetURL().GetParam(clientIDParam, "") != c.id {
				continue
			}
			if di, ok := inv.(*dubboproto.DubboInvoker); ok {
				di.BaseInvoker.Destroy()
			} else {
				inv.Destroy()
			}
		}
	})
}
