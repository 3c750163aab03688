// Package dubbo is the Dubbo protocol: Dubbo's 16-byte header and hessian2
// bodies over the netty transport, wire-compatible with Apache Dubbo and
// dubbo-go.
//
// A provider address (host:port) has one server however many services it
// exports; requests find their exporter by group/interface:version. A
// consumer shares one connection per provider address by default; a
// reference's `connections=N` gives it N connections of its own.
package dubbo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/exports"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Name is the protocol's extension name.
const Name = "dubbo"

// DefaultPort is Dubbo's default port.
const DefaultPort = 20880

// URL parameters this protocol reads.
const (
	KeyConnections = "connections"
	KeyHeartbeat   = "heartbeat"
	KeyReconnect   = "reconnect"
	// KeyReturn set to false on a method makes its calls one-way.
	KeyReturn = "return"
)

// Protocol exports services on dubbo servers and refers dubbo providers.
type Protocol struct {
	t   *netty.Transporter
	log *slog.Logger
	// pools finds a server's `threadpool` by name (nil: the fixed pool
	// of `threads` only).
	pools func(name string) (extension.ThreadPool, error)
	// sers resolves `serialization` names and header ids beyond hessian2
	// (nil: hessian2 only).
	sers extension.Serializations

	servers exports.Servers[*server]
	// clients are the connections shared per provider address.
	clients exports.Clients[*netty.ExchangeClient]
}

// New returns the protocol, logging to log.
func New(log *slog.Logger) *Protocol {
	return &Protocol{t: netty.NewTransporter(log), log: log}
}

// WithThreadPools returns p finding each server's `threadpool` (fixed,
// cached, limited, eager, or a plugin's) with pools.
func (p *Protocol) WithThreadPools(pools func(name string) (extension.ThreadPool, error)) *Protocol {
	p.pools = pools
	return p
}

// poolFor is the thread pool of the server u is exported on.
func (p *Protocol) poolFor(u *kernel.URL) (extension.PoolSpec, error) {
	return netty.PoolFor(p.pools, u)
}

// WithSerializations returns p choosing the serialization of each
// reference by its URL's `serialization` among sers, and reading frames of
// any of sers from peers. Without it, p speaks hessian2 only.
func (p *Protocol) WithSerializations(sers extension.Serializations) *Protocol {
	p.sers = sers
	return p
}

// WithSecurity returns p dialing a provider whose URL names a
// ClientSecurity (extension.KeySecurity, a mesh's) with its TLS; find
// looks it up by name.
func (p *Protocol) WithSecurity(find func(name string) (extension.ClientSecurity, error)) *Protocol {
	p.t.SetSecurity(find)
	return p
}

// codecFor is the codec of u: its payload and decode bounds, and its
// `serialization` (hessian2 by default) for what it writes.
func (p *Protocol) codecFor(u *kernel.URL) (*Codec, error) {
	c := NewCodec(int(u.ParamInt(kernel.KeyPayload, DefaultPayload))).WithDecodeFactor(int(u.ParamInt(KeyDecodeFactor, 0))).WithDecodeMemory(u.ParamInt(KeyDecodeMemory, 0))
	name := u.Param(KeySerialization)
	if p.sers == nil {
		if name != "" && name != hessian2.Name {
			return nil, fmt.Errorf("weft: dubbo: serialization %q: this protocol was built with hessian2 only", name)
		}
		return c, nil
	}
	var ser extension.Serialization
	if name != "" && name != hessian2.Name {
		s, err := p.sers.Serialization(name)
		if err != nil {
			return nil, fmt.Errorf("weft: dubbo: %w", err)
		}
		ser = s
	}
	return c.WithSerialization(ser, p.sers.ByID), nil
}

// KeySerialization is Dubbo's `serialization`: the name of the
// serialization a reference writes its calls in (hessian2 by default).
const KeySerialization = kernel.KeySerialization

// NewTLS returns the protocol speaking TLS with t's material on every
// server and client connection.
func NewTLS(log *slog.Logger, t *netty.TLS) *Protocol {
	p := New(log)
	p.t = netty.NewTLSTransporter(log, t)
	return p
}

var _ extension.Protocol = (*Protocol)(nil)

type server struct {
	es        *netty.ExchangeServer
	codec     *Codec
	exporters exports.Table[*exporter]
}

func (s *server) lookup(key string) *exporter {
	e, _ := s.exporters.Lookup(key)
	return e
}

func (s *server) keys() []string { return s.exporters.Keys() }

type exporter struct {
	s       *server
	key     string
	invoker kernel.Invoker
	once    sync.Once
	p       *Protocol
	addr    string
}

func (e *exporter) Invoker() kernel.Invoker { return e.invoker }

func (e *exporter) Unexport() {
	e.once.Do(func() {
		e.s.exporters.Remove(e)
		if e.p.servers.Release(e.addr, e.s, func() bool { return e.s.exporters.Len() == 0 }) {
			e.s.es.Close(5 * time.Second)
		}
	})
}

// Export serves invoker on its URL's host:port, opening the server on first
// use. Port 0 picks a free port; the exporter's invoker URL then carries the
// real one.
func (p *Protocol) Export(_ context.Context, invoker kernel.Invoker) (extension.Exporter, error) {
	u := invoker.URL()
	e, err := exports.Export(&p.servers, u, func() (*server, string, error) {
		codec, err := p.codecFor(u)
		if err != nil {
			return nil, "", err
		}
		pool, err := p.poolFor(u)
		if err != nil {
			return nil, "", fmt.Errorf("weft: dubbo: %w", err)
		}
		s := &server{codec: codec}
		es, err := netty.Bind(p.t, kernel.NewURL(u.Protocol, u.Host, u.Port, "", extension.ServerSecurityParams(u)), s.codec, &handler{s: s, log: p.log},
			netty.ServerOptions{
				Heartbeat: time.Duration(u.ParamInt(KeyHeartbeat, int64(netty.DefaultHeartbeat/time.Millisecond))) * time.Millisecond,
				Threads:   int(u.ParamInt(kernel.KeyThreads, netty.DefaultThreads)),
				Pool:      pool,
			})
		if err != nil {
			return nil, "", err
		}
		s.es = es
		return s, es.Addr(), nil
	}, func(s *server) *exports.Table[*exporter] { return &s.exporters }, func(s *server, addr string) *exporter {
		return &exporter{s: s, key: u.ServiceKey(), invoker: invoker, p: p, addr: addr}
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// BoundAddr returns the address a server for addr actually listens on, for
// exports on port 0.
func (e *exporter) BoundAddr() string { return e.s.es.Addr() }

// Destroy closes every server and client.
func (p *Protocol) Destroy() {
	for _, s := range p.servers.TakeAll() {
		s.es.Close(5 * time.Second)
	}
	p.clients.Close()
}

// handler serves one server's requests.
type handler struct {
	s   *server
	log *slog.Logger
}

func (h *handler) Reply(ch *netty.Conn, req *netty.Request) *netty.Response {
	r, ok := req.Data.(*RPCRequest)
	if !ok {
		return &netty.Response{Status: kernel.ResponseBadRequest, ErrMsg: fmt.Sprintf("request body is %T, not a Dubbo invocation", req.Data)}
	}
	iface := r.Path
	if s, ok := r.Attachments[kernel.KeyInterface].(string); ok && s != "" {
		iface = s
	}
	group, _ := r.Attachments[kernel.KeyGroup].(string)
	version := r.Version
	if version == "" || version == "0.0.0" {
		version, _ = r.Attachments[kernel.KeyVersion].(string)
		if version == "0.0.0" {
			version = ""
		}
	}
	key := kernel.ServiceKey(iface, group, version)
	e := h.s.lookup(key)
	if e == nil && h.s.exporters.Len() == 0 {
		// The last service was unexported: the server is closing (a
		// graceful stop), which says more than "not found" and is retried.
		return &netty.Response{Status: kernel.ResponseServerError,
			ErrMsg: fmt.Sprintf("server %s is shutting down; retry on another provider", h.s.es.Addr())}
	}
	if e == nil {
		return &netty.Response{Status: kernel.ResponseServiceNotFound,
			ErrMsg: fmt.Sprintf("service %q not found on %s (exported here: %s); check interface, group and version",
				view.Cut(key, 200), h.s.es.Addr(), strings.Join(h.s.keys(), ", "))}
	}
	f := r.frame
	if f == nil {
		f = &requestFrame{}
	}
	inv := &f.inv
	*inv = kernel.Invocation{Method: r.Method, ParamTypes: r.ParamTypes, Args: r.Args, RemoteAddr: ch.RemoteAddrString(), TLS: ch.TLS(), MTLS: ch.MTLS()}
	inv.SetAttachments(r.Attachments)
	if e.key == exports.Wildcard { // set at export: no URL lookup per call
		// A gateway: it learns which service was called from here.
		inv.SetAttachment(kernel.KeyInterface, iface)
		inv.SetAttachment(kernel.KeyGroup, group)
		inv.SetAttachment(kernel.KeyVersion, version)
	}
	// The consumer's deadline travels: no provider works for a consumer
	// that gave up. Filters, the implementation and WASM guests see it; the
	// provider's own `timeout` (the timeout filter) may cut it shorter.
	// Both bounds are set here, in one context whose timer starts only if
	// something waits on it (kernel.WithDeadline), so that the timeout
	// filter has nothing left to add on the common path.
	budget := consumerBudget(r.Attachments)
	if own := e.invoker.URL().MethodTimeout(r.Method, 0); own > 0 && (budget <= 0 || own < budget) {
		budget = own
	}
	var deadline time.Time
	if budget > 0 {
		deadline = time.Now().Add(budget)
	}
	ctx := f.ctx.Start(context.Background(), inv, deadline)
	defer f.ctx.Release()
	res, err := e.invoker.Invoke(ctx, inv)
	if err != nil && !kernel.IsBiz(err) {
		return frameworkResponse(err)
	}
	resp, out := newResponse(&f.resp)
	out.WithAttachments, out.Attachments = supportsResponseAttachments(r.DubboVersion), res.Attachments
	out.Serialization = r.Serialization
	if err != nil {
		out.Exception = err
	} else {
		out.Value = res.Value
	}
	return resp
}

// consumerBudget is how long the consumer still waits for a call: Dubbo's
// countdown `_TO` (sent by Java with enable-timeout-countdown, and by weft
// always), else the consumer's `timeout` (which Java and dubbo-go send with
// every call, as a String or an Integer); 0 when neither is there.
func consumerBudget(att map[string]any) time.Duration {
	for _, k := range [...]string{KeyCountdown, "_to", kernel.KeyTimeout} {
		if ms, ok := millis(att[k]); ok && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 0
}

// millis reads an attachment as a number of milliseconds.
func millis(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// frameworkResponse answers a failure of the framework with Dubbo's status
// for its code where Dubbo has one, else SERVICE_ERROR (70), the status Java
// Dubbo sends for an exception outside the service. The text is
// kernel.WireText's "weft: <code>: <message>": Java and dubbo-go consumers
// read it as the error's message, a weft consumer takes the code back from
// it (kernel.ResponseError), so a forbidden stays forbidden across processes.
func frameworkResponse(err error) *netty.Response {
	var ke *kernel.Error
	status := kernel.ResponseServiceError
	if errors.As(err, &ke) {
		switch ke.Code {
		case kernel.CodeTimeout:
			status = kernel.ResponseServerTimeout
		case kernel.CodeServiceNotFound:
			status = kernel.ResponseServiceNotFound
		case kernel.CodeSerialization:
			status = kernel.ResponseBadRequest
		case kernel.CodeLimitExceeded:
			status = kernel.ResponseServerThreadpoolExhausted
		case kernel.CodeShuttingDown:
			status = kernel.ResponseServerError
		}
	}
	return &netty.Response{Status: status, ErrMsg: kernel.WireText(err)}
}

// supportsResponseAttachments: Dubbo 2.0.2 and later read attachments on
// responses (Dubbo's Version.isSupportResponseAttachment).
func supportsResponseAttachments(v string) bool {
	if v == DubboVersion {
		return true
	}
	if v == "" {
		return false
	}
	parts := strings.SplitN(v, ".", 4)
	nums := [3]int{}
	for i := 0; i < len(parts) && i < 3; i++ {
		nums[i], _ = strconv.Atoi(strings.TrimFunc(parts[i], func(r rune) bool { return r < '0' || r > '9' }))
	}
	n := nums[0]*10000 + nums[1]*100 + nums[2]
	return n >= 20002 && n < 20100 || n >= 20700 || nums[0] >= 3
}

// Refer connects to the provider url describes (sharing the connection of
// its address unless `connections` asks for dedicated ones).
func (p *Protocol) Refer(_ context.Context, url *kernel.URL) (kernel.Invoker, error) {
	opt := netty.ClientOptions{
		Heartbeat: time.Duration(url.ParamInt(KeyHeartbeat, int64(netty.DefaultHeartbeat/time.Millisecond))) * time.Millisecond,
		Reconnect: time.Duration(url.ParamInt(KeyReconnect, int64(netty.DefaultReconnect/time.Millisecond))) * time.Millisecond,
	}
	codec, err := p.codecFor(url)
	if err != nil {
		return nil, err
	}
	iv := &invoker{p: p, url: url, version: url.Param(kernel.KeyVersion)}
	// The provider URL's parameters every call sends (kernel's table:
	// path, interface, version, group, token); the per-method ones are
	// added by fixedFor.
	iv.attachments = make(map[string]any, len(kernel.InvokerAttachments))
	for _, a := range kernel.InvokerAttachments {
		if v := a.Value(url, ""); !a.PerMethod && v != "" {
			iv.attachments[a.Key] = v
		}
	}
	if n := url.ParamInt(KeyConnections, 0); n > 0 {
		for range n {
			iv.clients = append(iv.clients, netty.NewExchangeClient(p.t, url, codec, opt))
		}
		iv.owned = true
		return iv, nil
	}
	iv.clients = []*netty.ExchangeClient{p.clients.Hold(extension.SecurityShareKey(url), func() *netty.ExchangeClient {
		return netty.NewExchangeClient(p.t, url, codec, opt)
	})}
	return iv, nil
}

type invoker struct {
	p           *Protocol
	url         *kernel.URL
	version     string
	attachments map[string]any // sent with every call: kernel.InvokerAttachments but the per-method ones
	fixed       sync.Map       // method -> attachments plus its timeout, read-only once stored
	clients     []*netty.ExchangeClient
	owned       bool
	next        atomic.Uint32
	destroyed   atomic.Bool
}

func (iv *invoker) URL() *kernel.URL { return iv.url }

func (iv *invoker) IsAvailable() bool {
	if iv.destroyed.Load() {
		return false
	}
	for _, c := range iv.clients {
		if c.IsAvailable() {
			return true
		}
	}
	return false
}

// WhyUnavailable is kernel.WhyUnavailable: the clients' reasons.
func (iv *invoker) WhyUnavailable() error {
	if iv.destroyed.Load() {
		return kernel.Errorf(kernel.CodeNetwork, "invoker of %s at %s is destroyed", iv.url.ServiceKey(), iv.url.Address())
	}
	var first error
	for _, c := range iv.clients {
		err := c.Unavailable()
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (iv *invoker) Destroy() {
	if iv.destroyed.Swap(true) {
		return
	}
	// Calls in flight on these clients still get their answers: the
	// clients close once those have ended (a provider that left the
	// registry is draining them), while no new call can choose this
	// invoker any more.
	for _, c := range iv.clients {
		if iv.owned {
			iv.p.clients.CloseGracefully(c)
		} else {
			iv.p.clients.Release(extension.SecurityShareKey(iv.url), c)
		}
	}
}

// fixedFor returns the attachments every call of method sends: the
// invoker's plus the per-method ones of kernel.InvokerAttachments (Dubbo's
// `timeout`, the configured one, as Dubbo sends it).
func (iv *invoker) fixedFor(method string) map[string]any {
	if m, ok := iv.fixed.Load(method); ok {
		return m.(map[string]any)
	}
	m := make(map[string]any, len(iv.attachments)+1)
	for k, v := range iv.attachments {
		m[k] = v
	}
	for _, a := range kernel.InvokerAttachments {
		if v := a.Value(iv.url, method); a.PerMethod && v != "" {
			m[a.Key] = v
		}
	}
	iv.fixed.Store(method, m)
	return m
}

// Clients exposes the exchange clients, for tests and diagnostics.
func (iv *invoker) Clients() []*netty.ExchangeClient { return iv.clients }

func (iv *invoker) client() *netty.ExchangeClient {
	if len(iv.clients) == 1 {
		return iv.clients[0]
	}
	return iv.clients[int(iv.next.Add(1))%len(iv.clients)]
}

var requestPool = sync.Pool{New: func() any { return new(RPCRequest) }}

// Invoke sends the call. A destroyed invoker still sends while its
// connection drains (as Dubbo's AbstractInvoker only warns): a call that
// chose it just before its provider left the registry goes through rather
// than failing unsent; once the connection is closed the client refuses it
// with a network error, which another provider can answer.
func (iv *invoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	if _, ok := inv.Attribute(kernel.AttrStream); ok {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s.%s streams: the dubbo protocol has one answer per call; refer the service over tri://",
			iv.url.ServiceKey(), inv.Method)
	}
	timeout := iv.url.MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond)
	// Encoded synchronously by the send and never kept: pooled.
	req := requestPool.Get().(*RPCRequest)
	defer func() {
		*req = RPCRequest{}
		requestPool.Put(req)
	}()
	*req = RPCRequest{DubboVersion: DubboVersion, Path: iv.url.Path, Version: iv.version, Method: inv.Method,
		ParamTypes: inv.ParamTypes, Args: inv.Args, Attachments: inv.Attachments(), Fixed: iv.fixedFor(inv.Method)}
	// The provider learns how long this consumer waits (Dubbo's countdown).
	wait := timeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait <= 0 {
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeTimeout, Cause: context.DeadlineExceeded,
			Msg: fmt.Sprintf("no time left to call %s.%s on %s", iv.url.ServiceKey(), inv.Method, iv.url.Address())}
	}
	if timeout-wait > time.Millisecond {
		// Tighter than the `timeout` attachment says (a retry, a caller's
		// deadline): the provider needs the countdown. Otherwise `timeout`
		// tells it, and the call sends one attachment less.
		req.Countdown = max(wait.Milliseconds(), 1)
	}
	c := iv.client()
	if !iv.url.MethodParamBool(inv.Method, KeyReturn, true) {
		return kernel.Result{}, c.Oneway(req)
	}
	resp, err := c.Request(ctx, req, timeout)
	if err != nil {
		return kernel.Result{}, err
	}
	if resp.Status != kernel.ResponseOK {
		return kernel.Result{}, kernel.ResponseError(resp.Status, resp.ErrMsg)
	}
	r, _ := resp.Data.(*RPCResult)
	if r == nil {
		return kernel.Result{}, nil
	}
	if r.Exception != nil {
		return kernel.Result{Attachments: r.Attachments}, kernel.BizError(r.Exception)
	}
	return kernel.Result{Value: r.Value, Attachments: r.Attachments}, nil
}

// ServerStats returns the pool and connection counts of every server this
// protocol runs, sorted by address; the metrics read them at scrape time.
func (p *Protocol) ServerStats() []netty.ServerStats {
	servers := p.servers.All()
	out := make([]netty.ServerStats, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.es.Stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// ClientConnections is the number of open connections to providers.
func (p *Protocol) ClientConnections() int64 { return p.t.ClientConnections() }
