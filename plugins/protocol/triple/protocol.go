// Package triple is Dubbo 3's Triple protocol: gRPC over HTTP/2, so that a
// weft provider answers grpc-go clients, grpcurl and Dubbo 3 consumers with
// the same services, clusters and filters as over the dubbo protocol.
//
// HTTP/2 runs on weft's own transport (transport-netty) rather than on
// net/http: a connection's frames are split by a stateless codec and run
// through the connection's HTTP/2 state on its read loop (framing), which
// hands each complete unary call to the exchange server that also serves
// the dubbo protocol, with its `threads` bound, inline serving and write
// batching. Measured on a 2-core machine with grpc-go's own load generator
// (1 KiB unary echo, one connection), net/http's HTTP/2 server gave 0.45 to
// 0.75 times grpc-go's calls per second: a goroutine and several buffers
// per stream, and writes that the transport here batches.
//
// Answers are encoded without HPACK's dynamic table (see
// h2.AppendField): every goroutine encodes its own response, in
// parallel, with nothing shared.
package triple

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/exports"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Name is the protocol's extension name, as in Dubbo (tri://).
const Name = "tri"

// DefaultPort is Dubbo 3's default Triple port.
const DefaultPort = 50051

// DefaultPayload is the largest request message, as Dubbo's payload.
const DefaultPayload = 8 << 20

// Triple's own headers, as Dubbo 3 sends them.
const (
	headerServiceVersion = "tri-service-version"
	headerServiceGroup   = "tri-service-group"
	headerExceptionCode  = "tri-exception-code"
	headerConsumerApp    = "tri-consumer-appname"
)

// Protocol exports services on Triple servers.
type Protocol struct {
	t   *netty.Transporter
	log *slog.Logger
	// pools finds a server's `threadpool` by name (nil: the fixed pool
	// of `threads` only).
	pools func(name string) (extension.ThreadPool, error)
	tls   bool
	// sers resolves the serialization of wrapped (non-IDL) calls beyond
	// hessian2: a content type's subtype, a reference's `serialization`.
	sers extension.Serializations

	servers exports.Servers[*server]
	// clients are the connections shared per provider address.
	clients exports.Clients[*sharedClient]
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

// WithSerializations returns p resolving the serializations of wrapped
// calls among sers: application/grpc+<name> from peers, and a reference's
// `serialization`. Without it, wrapped calls are hessian2.
func (p *Protocol) WithSerializations(sers extension.Serializations) *Protocol {
	p.sers = sers
	return p
}

// WithSecurity returns p dialing a provider whose URL names a
// ClientSecurity (extension.KeySecurity, a mesh's) with its TLS, offering
// HTTP/2 (gRPC servers refuse a handshake without it); find looks it up by
// name.
func (p *Protocol) WithSecurity(find func(name string) (extension.ClientSecurity, error)) *Protocol {
	p.t.SetSecurity(find, "h2")
	return p
}

// NewTLS returns the protocol speaking TLS with t's material.
func NewTLS(log *slog.Logger, t *netty.TLS) *Protocol {
	p := New(log)
	p.t = netty.NewTLSTransporterALPN(log, t, "h2")
	p.tls = true
	return p
}

var _ extension.Protocol = (*Protocol)(nil)

type server struct {
	p         *Protocol
	es        *netty.ExchangeServer
	exporters exports.Table[*exporter]
}

func (s *server) lookup(key string) *exporter {
	e, _ := s.exporters.Lookup(key)
	if e != nil && e.key == exports.Wildcard && (key == healthService || strings.HasPrefix(key, "grpc.reflection.")) {
		return nil // the server's own services are never a gateway's
	}
	return e
}

func (s *server) keys() []string { return s.exporters.Keys() }

type exporter struct {
	s          *server
	unexported atomic.Bool
	key        string
	invoker    kernel.Invoker
	once       sync.Once
	p          *Protocol
	addr       string
}

func (e *exporter) Invoker() kernel.Invoker { return e.invoker }

// BoundAddr is the address the exporter's server listens on.
func (e *exporter) BoundAddr() string { return e.s.es.Addr() }

func (e *exporter) Unexport() {
	e.once.Do(func() {
		e.unexported.Store(true)
		e.s.exporters.Remove(e)
		if e.p.servers.Release(e.addr, e.s, func() bool { return e.s.exporters.Len() == 0 }) {
			e.s.es.Close(5 * time.Second)
		}
	})
}

// Export serves invoker on its URL's host:port, one server per address.
func (p *Protocol) Export(_ context.Context, invoker kernel.Invoker) (extension.Exporter, error) {
	u := invoker.URL()
	e, err := exports.Export(&p.servers, u, func() (*server, string, error) {
		pool, err := p.poolFor(u)
		if err != nil {
			return nil, "", fmt.Errorf("weft: tri: %w", err)
		}
		s := &server{p: p}
		payload := int(u.ParamInt(kernel.KeyPayload, DefaultPayload))
		if payload <= 0 {
			payload = DefaultPayload
		}
		es, err := netty.Bind(p.t, kernel.NewURL(u.Protocol, u.Host, u.Port, "", extension.ServerSecurityParams(u)), &codec{maxFrame: h2.DefaultMaxFrame, maxBody: payload},
			&handler{s: s, log: p.log},
			netty.ServerOptions{
				// A connection that sends nothing for 3 heartbeats is
				// closed, as Dubbo closes idle channels and gRPC servers
				// with MaxConnectionIdle do: its client reconnects when
				// it next calls.
				Heartbeat: time.Duration(u.ParamInt("heartbeat", int64(netty.DefaultHeartbeat/time.Millisecond))) * time.Millisecond,
				Threads:   int(u.ParamInt(kernel.KeyThreads, netty.DefaultThreads)),
				Pool:      pool,
				Framing: func(es *netty.ExchangeServer) extension.ChannelHandler {
					return newFraming(es, s, u, payload)
				},
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

// Destroy closes every server.
func (p *Protocol) Destroy() {
	for _, s := range p.servers.TakeAll() {
		s.es.Close(5 * time.Second)
	}
	p.clients.Close()
}

// serverCall is everything a provider's call needs, in one allocation.
type serverCall struct {
	call
	ss   *serverStream // a client- or bidi-streaming call's
	inv  kernel.Invocation
	args [1]any
	arg  protoArg
	cc   kernel.CallContext
}

// call is a complete unary request.
type call struct {
	st          *stream
	service     string
	method      string
	contentType string
	timeout     time.Duration
	gzip        bool
	msg         []byte
}

// handler serves calls on the exchange server's goroutines.
type handler struct {
	s   *server
	log *slog.Logger
}

// Unserved forgets a stream the exchange server answered itself.
func (h *handler) Unserved(_ *netty.Conn, req *netty.Request, resp *netty.Response) {
	switch c := req.Data.(type) {
	case *serverCall:
		c.st.sc.done(c.st)
	case *http1Call:
		// The exchange server's answer was no HTTP/1.1 (appendResponse
		// drops it): this one is, in the request's turn.
		st, _ := exchangeStatus(resp.Status)
		c.answer(http1Error(st, resp.ErrMsg, c.r.close))
	}
}

// Reply serves a call and returns its whole response as frames.
func (h *handler) Reply(conn *netty.Conn, req *netty.Request) *netty.Response {
	if c, ok := req.Data.(*http1Call); ok {
		c.answer(h.replyHTTP1(conn, c))
		return nil
	}
	all := req.Data.(*serverCall)
	c := &all.call
	st, sc := c.st, c.st.sc
	defer sc.done(st)
	hdr := st.headers
	e := st.exp
	key := ""
	if e == nil || e.unexported.Load() {
		key = kernel.ServiceKey(c.service, header(hdr, headerServiceGroup), header(hdr, headerServiceVersion))
		e = h.s.lookup(key)
	}
	if e == nil && c.service == healthService && !c.gzip {
		return h.health(context.Background(), st, c, c.msg)
	}
	if e == nil && (c.service == reflectionV1 || c.service == reflectionV1alpha) && all.ss != nil {
		return h.reflection(all)
	}
	if e == nil {
		if h.s.exporters.Len() == 0 {
			return trailersOnly(st.id, statusUnavailable, kernel.CodeShuttingDown,
				fmt.Sprintf("server %s is shutting down; retry on another provider", h.s.es.Addr()))
		}
		return trailersOnly(st.id, statusUnimplemented, kernel.CodeServiceNotFound,
			fmt.Sprintf("unknown service %s (exported here: %s); check the service name, tri-service-group and tri-service-version",
				view.Cut(key, 200), strings.Join(h.s.keys(), ", ")))
	}
	kind := st.kind // the read loop's, from st.exp
	if e != st.exp {
		kind = kernel.ParseStreamKind(e.invoker.URL().MethodParam(c.method, kernel.KeyStream))
	}
	if kind != kernel.Unary {
		return h.replyStream(conn, e, all, kind)
	}
	msg := c.msg
	if c.gzip {
		var err error
		if msg, err = gunzip(msg, sc.f.payload); err != nil {
			return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "request message: "+err.Error())
		}
	}
	inv := &all.inv
	ws, nonIDL, err := wrappedSer(h.s.p.sers, subtype(c.contentType))
	if err != nil {
		return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "request: "+err.Error())
	}
	if nonIDL {
		args, desc, err := unwrapArgs(msg, ws)
		if err != nil {
			return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "request: "+err.Error())
		}
		*inv = kernel.Invocation{Method: c.method, ParamTypes: desc, Args: args, RemoteAddr: conn.RemoteAddrString(), TLS: conn.TLS(), MTLS: conn.MTLS()}
	} else {
		all.arg.data = msg
		all.args[0] = &all.arg
		*inv = kernel.Invocation{Method: c.method, Args: all.args[:], RemoteAddr: conn.RemoteAddrString(), TLS: conn.TLS(), MTLS: conn.MTLS()}
	}
	inv.SetAttachments(attachmentsOf(hdr))
	addressed(e, inv, c.service, header(hdr, headerServiceGroup), header(hdr, headerServiceVersion))
	budget := c.timeout
	if own := e.invoker.URL().MethodTimeout(c.method, 0); own > 0 && (budget <= 0 || own < budget) {
		budget = own
	}
	var deadline time.Time
	if budget > 0 {
		deadline = time.Now().Add(budget)
	}
	// Cancelable: the client's RST_STREAM (or the connection's end) ends
	// the call's context (stream.cancel).
	ctx := all.cc.StartCancelable(context.Background(), inv, deadline)
	defer all.cc.Release()
	sc.mu.Lock()
	st.cc = &all.cc
	reset := st.reset
	sc.mu.Unlock()
	if reset {
		return nil
	}
	res, err := e.invoker.Invoke(ctx, inv)
	if err != nil {
		code := kernel.CodeOf(err)
		text := err.Error()
		if code == kernel.CodeBiz {
			if errors.Unwrap(err) != nil {
				text = errors.Unwrap(err).Error()
			}
		}
		if st.wasReset() {
			return nil // the client reset the stream: nobody to answer
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && code != kernel.CodeTimeout {
			// The call's deadline ended it, whatever the method made of
			// that: the client is told so, as gRPC servers do.
			code, text = kernel.CodeTimeout, fmt.Sprintf("%s.%s passed its deadline of %v: %s", c.service, c.method, budget, text)
		}
		var sd StatusDetailer
		if errors.As(err, &sd) {
			b := appendTrailersOnlyDetails(nil, st.id, 200, grpcStatusOf(code), text, code, sd.GRPCStatusDetails())
			return &netty.Response{ID: uint64(st.id), Status: kernel.ResponseOK, Data: rawFrames(b)}
		}
		return trailersOnly(st.id, grpcStatusOf(code), code, text)
	}
	var out []byte
	switch v := res.Value.(type) {
	case nil:
		out = make([]byte, 5)
		if nonIDL {
			out, err = wrapResult(out, nil, ws)
		}
	case proto.Message:
		if resp := h.answerMessage(ctx, st, c, v, res.Attachments, headersOf(inv)); resp != nil {
			return resp
		}
		out, err = proto.MarshalOptions{}.MarshalAppend(make([]byte, 5, 5+proto.Size(v)), v)
	default:
		if nonIDL {
			out, err = wrapResult(make([]byte, 5, 64), v, ws)
			break
		}
		err = fmt.Errorf("%s.%s returned %T, not a protobuf message; over Triple it is called with protobuf messages, or with hessian2 ones (content-type application/grpc+hessian2)",
			c.service, c.method, res.Value)
	}
	if err != nil {
		return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "result: "+err.Error())
	}
	binary.BigEndian.PutUint32(out[1:], uint32(len(out)-5))
	return h.answer(ctx, st, c, out, res.Attachments, headersOf(inv))
}

// replyStream serves a streaming call: the method gets its stream (and a
// server-streaming one its request), sends on it, and its return ends the
// call with the trailers.
func (h *handler) replyStream(conn *netty.Conn, e *exporter, all *serverCall, kind kernel.StreamKind) *netty.Response {
	c := &all.call
	st, sc := c.st, c.st.sc
	ss := all.ss
	if ss == nil { // server streaming: its one request came whole
		ss = newServerStream(st, c.contentType, sc.f.payload)
		ss.ended = true
		st.ss = ss
	}
	inv := &all.inv
	if kind == kernel.ServerStreaming {
		msg := c.msg
		if c.gzip {
			var err error
			if msg, err = gunzip(msg, sc.f.payload); err != nil {
				return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "request message: "+err.Error())
			}
		}
		all.arg.data = msg
		*inv = kernel.Invocation{Method: c.method, Args: []any{&all.arg, ss}, RemoteAddr: conn.RemoteAddrString(), TLS: conn.TLS(), MTLS: conn.MTLS()}
	} else {
		*inv = kernel.Invocation{Method: c.method, Args: []any{ss}, RemoteAddr: conn.RemoteAddrString(), TLS: conn.TLS(), MTLS: conn.MTLS()}
	}
	inv.SetAttachments(attachmentsOf(st.headers))
	budget := c.timeout
	if own := e.invoker.URL().MethodTimeout(c.method, 0); own > 0 && (budget <= 0 || own < budget) {
		budget = own
	}
	var deadline time.Time
	if budget > 0 {
		deadline = time.Now().Add(budget)
	}
	ctx := all.cc.StartCancelable(context.Background(), inv, deadline)
	defer all.cc.Release()
	ss.ctx, ss.inv = ctx, inv
	sc.mu.Lock()
	st.cc = &all.cc
	reset := st.reset
	sc.mu.Unlock()
	if reset {
		return nil
	}
	res, err := e.invoker.Invoke(ctx, inv)
	if st.wasReset() {
		return nil
	}
	if err == nil && kind == kernel.ClientStreaming {
		// The method's one answer.
		if res.Value == nil {
			err = kernel.Errorf(kernel.CodeSerialization, "%s.%s returned no message", c.service, c.method)
		} else {
			err = ss.SendMsg(res.Value)
		}
	}
	if err != nil {
		code := kernel.CodeOf(err)
		text := err.Error()
		if code == kernel.CodeBiz && errors.Unwrap(err) != nil {
			text = errors.Unwrap(err).Error()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && code != kernel.CodeTimeout {
			code, text = kernel.CodeTimeout, fmt.Sprintf("%s.%s passed its deadline of %v: %s", c.service, c.method, budget, text)
		}
		return ss.trailers(grpcStatusOf(code), code, view.Cut(text, netty.MaxErrorText), res.Attachments)
	}
	return ss.trailers(statusOK, 0, "", res.Attachments)
}

// answerMessage is answer for the common case, a message that fits the
// client's windows and one frame: it is marshalled straight into the
// response's frames, with no buffer of its own. It returns nil otherwise
// (answer then sends it in pieces).
func (h *handler) answerMessage(ctx context.Context, st *stream, c *call, m proto.Message, att, headers map[string]any) *netty.Response {
	sc := st.sc
	size := proto.Size(m)
	maxFrame := sc.maxFrameNow()
	if 5+size > maxFrame {
		return nil
	}
	n, _ := sc.tryReserve(st, 5+size)
	if n == 0 {
		return nil
	}
	hb := make([]byte, 0, 64)
	hb = h2.AppendField(hb, ":status", "200")
	hb = h2.AppendField(hb, "content-type", c.contentType)
	hb = appendMetadata(hb, headers)
	pf := (*pooledFrames)(netty.Buffer(3*h2.FrameHeaderLen + len(hb) + 5 + size + 64))
	frames := h2.AppendHeaders((*pf)[:0], st.id, hb, maxFrame, false)
	frames = h2.AppendFrameHeader(frames, 5+size, h2.FrameData, 0, st.id)
	frames = append(frames, 0, byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
	frames, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(frames, m)
	if err != nil {
		*pf = frames
		pf.Sent()
		sc.refund(st, 5+size)
		return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "result: "+err.Error())
	}
	tb := hb[:0]
	tb = h2.AppendField(tb, "grpc-status", "0")
	tb = appendMetadata(tb, att)
	*pf = h2.AppendHeaders(frames, st.id, tb, maxFrame, true)
	return &netty.Response{ID: uint64(st.id), Status: kernel.ResponseOK, Data: pf}
}

// answer returns the response of st: HEADERS, the message as DATA as the
// flow-control windows allow, and the trailers. What does not fit the
// windows is sent from here as they open; the rest goes as the Response.
func (h *handler) answer(ctx context.Context, st *stream, c *call, msg []byte, att, headers map[string]any) *netty.Response {
	sc := st.sc
	hb := make([]byte, 0, 64)
	hb = h2.AppendField(hb, ":status", "200")
	hb = h2.AppendField(hb, "content-type", c.contentType)
	hb = appendMetadata(hb, headers)
	// One buffer for the frames: HEADERS, DATA, trailers.
	frames := h2.AppendHeaders(make([]byte, 0, 3*h2.FrameHeaderLen+len(hb)+len(msg)+64), st.id, hb, sc.maxFrameNow(), false)
	for len(msg) > 0 {
		n, maxFrame := sc.reserve(ctx, st, len(msg))
		if n == 0 {
			if sc.closed || st.reset {
				return nil
			}
			// The deadline passed while the client's windows were shut.
			return &netty.Response{ID: uint64(st.id), Status: kernel.ResponseOK,
				Data: rawFrames(h2.AppendRST(frames, st.id, h2.CodeCancel))}
		}
		frames = h2.AppendData(frames, st.id, msg[:n], maxFrame, false)
		sc.dataOut.Add(int64((n + maxFrame - 1) / maxFrame))
		msg = msg[n:]
		if len(msg) > 0 {
			sc.send(frames)
			frames = nil
		}
	}
	tb := hb[:0] // the header block is in frames already
	tb = h2.AppendField(tb, "grpc-status", "0")
	// Reply attachments travel in the trailers, as Dubbo 3 sends them.
	tb = appendMetadata(tb, att)
	frames = h2.AppendHeaders(frames, st.id, tb, sc.maxFrameNow(), true)
	return &netty.Response{ID: uint64(st.id), Status: kernel.ResponseOK, Data: rawFrames(frames)}
}

// StatusDetailer is a business error that carries gRPC's rich error
// details: GRPCStatusDetails returns a google.rpc.Status, encoded, which
// goes as grpc-status-details-bin.
type StatusDetailer interface {
	GRPCStatusDetails() []byte
}

// trailersOnly is the response of a call that failed: one HEADERS frame
// with :status 200 and the gRPC status.
func trailersOnly(id uint32, grpcStatus int, code kernel.Code, msg string) *netty.Response {
	return &netty.Response{ID: uint64(id), Status: kernel.ResponseOK,
		Data: rawFrames(appendTrailersOnly(nil, id, 200, grpcStatus, msg, code))}
}

// appendTrailersOnly appends a trailers-only response (RFC: a HEADERS
// frame with END_STREAM carrying :status, content-type and the status).
func appendTrailersOnly(dst []byte, id uint32, httpStatus, grpcStatus int, msg string, code kernel.Code) []byte {
	return appendTrailersOnlyDetails(dst, id, httpStatus, grpcStatus, msg, code, nil)
}

// appendTrailersOnlyDetails is appendTrailersOnly with
// grpc-status-details-bin.
func appendTrailersOnlyDetails(dst []byte, id uint32, httpStatus, grpcStatus int, msg string, code kernel.Code, details []byte) []byte {
	var hb []byte
	hb = h2.AppendField(hb, ":status", strconv.Itoa(httpStatus))
	hb = h2.AppendField(hb, "content-type", "application/grpc")
	hb = h2.AppendField(hb, "grpc-status", strconv.Itoa(grpcStatus))
	if msg != "" {
		hb = h2.AppendField(hb, "grpc-message", encodeMessage(view.Cut(msg, netty.MaxErrorText)))
	}
	if grpcStatus != statusOK {
		hb = h2.AppendField(hb, headerExceptionCode, strconv.Itoa(int(code)))
	}
	if len(details) > 0 && len(details) <= netty.MaxErrorText {
		hb = h2.AppendField(hb, "grpc-status-details-bin", base64Raw(details))
	}
	return h2.AppendHeaders(dst, id, hb, h2.DefaultMaxFrame, true)
}

// appendResponse encodes what the exchange server sends: a handler's
// frames, or its own answers (every thread busy, shutting down) as
// trailers-only responses.
func appendResponse(dst []byte, r *netty.Response) ([]byte, error) {
	if a, ok := r.Data.(appender); ok {
		return a.appendFrames(dst)
	}
	if r.ID >= http1Base {
		return dst, nil // an HTTP/1.1 call's: answered by Unserved
	}
	grpcStatus, code := exchangeStatus(r.Status)
	return appendTrailersOnly(dst, uint32(r.ID), 200, grpcStatus, r.ErrMsg, code), nil
}

// exchangeStatus maps the statuses the exchange server answers with itself.
func exchangeStatus(status byte) (int, kernel.Code) {
	switch status {
	case kernel.ResponseServerThreadpoolExhausted:
		return statusResourceExhausted, kernel.CodeLimitExceeded
	case kernel.ResponseServerError:
		return statusUnavailable, kernel.CodeShuttingDown
	case kernel.ResponseBadRequest, kernel.ResponseBadResponse:
		return statusInternal, kernel.CodeSerialization
	case kernel.ResponseServerTimeout:
		return statusDeadlineExceeded, kernel.CodeTimeout
	}
	return statusUnknown, kernel.CodeUnknown
}

// replyHTTP1 serves an HTTP/1.1 JSON call and returns its answer.
func (h *handler) replyHTTP1(conn *netty.Conn, c *http1Call) []byte {
	r := c.r
	if r.method != "POST" {
		return http1Answer(405, []byte(`{"code":13,"message":"Triple's HTTP/1.1 calls are POST with a JSON body"}`), r.close)
	}
	if ct := r.headers["content-type"]; ct != "" && !strings.HasPrefix(ct, "application/json") {
		return http1Answer(415, []byte(fmt.Sprintf(`{"code":13,"message":%q}`, "content-type "+cut(ct)+": HTTP/1.1 calls take application/json")), r.close)
	}
	svc, method, ok := splitPath(r.path)
	if !ok {
		return http1Error(statusUnimplemented, fmt.Sprintf("malformed method name %q: want /service/method", cut(r.path)), r.close)
	}
	key := kernel.ServiceKey(svc, r.headers[headerServiceGroup], r.headers[headerServiceVersion])
	e := h.s.lookup(key)
	if e == nil {
		return http1Error(statusUnimplemented, fmt.Sprintf("unknown service %s (exported here: %s)", view.Cut(key, 200), strings.Join(h.s.keys(), ", ")), r.close)
	}
	args, err := jsonArgsOf(r.body)
	if err != nil {
		return http1Error(statusInvalidArgument, err.Error(), r.close)
	}
	inv := &kernel.Invocation{Method: method, Args: args, RemoteAddr: conn.RemoteAddrString(), TLS: conn.TLS(), MTLS: conn.MTLS()}
	att := map[string]any{}
	for k, v := range r.headers {
		if !reservedHeader(k) {
			att[k] = v
		}
	}
	inv.SetAttachments(att)
	addressed(e, inv, svc, r.headers[headerServiceGroup], r.headers[headerServiceVersion])
	var deadline time.Time
	if own := e.invoker.URL().MethodTimeout(method, 0); own > 0 {
		deadline = time.Now().Add(own)
	}
	var cc kernel.CallContext
	ctx := cc.Start(context.Background(), inv, deadline)
	defer cc.Release()
	res, err := e.invoker.Invoke(ctx, inv)
	if err != nil {
		code := kernel.CodeOf(err)
		text := err.Error()
		if code == kernel.CodeBiz && errors.Unwrap(err) != nil {
			text = errors.Unwrap(err).Error()
		}
		return http1Error(grpcStatusOf(code), text, r.close)
	}
	body, err := jsonResult(res.Value)
	if err != nil {
		return http1Error(statusInternal, "result as JSON: "+err.Error(), r.close)
	}
	return http1Answer(200, body, r.close)
}

// appendMetadata appends attachments as response headers: strings as they
// are, bytes as -bin (base64), other values as their text.
func appendMetadata(hb []byte, att map[string]any) []byte {
	for k, v := range att {
		k = strings.ToLower(k)
		if reservedHeader(k) || !validHeaderName(k) {
			continue
		}
		switch x := v.(type) {
		case string:
			if validHeaderValue(x) {
				hb = h2.AppendField(hb, k, x)
			}
		case []byte:
			if !strings.HasSuffix(k, "-bin") {
				k += "-bin"
			}
			hb = h2.AppendField(hb, k, base64Raw(x))
		default:
			if s := view.Text(x); validHeaderValue(s) {
				hb = h2.AppendField(hb, k, s)
			}
		}
	}
	return hb
}

// attachmentsOf turns request metadata into attachments: -bin values
// decoded to bytes, the rest as strings; Triple's own headers under the
// attachment keys Dubbo gives them, and the service :path names as the
// path and interface a dubbo consumer sends (kernel.InvokerAttachments).
func attachmentsOf(h []hpackField) map[string]any {
	var att map[string]any
	for _, f := range h {
		if f.Name == ":path" {
			if svc, _, ok := splitPath(f.Value); ok {
				if att == nil {
					att = make(map[string]any, attHint(h))
				}
				att[kernel.KeyPath], att[kernel.KeyInterface] = svc, svc
			}
			continue
		}
		if reservedHeader(f.Name) {
			continue
		}
		if att == nil {
			att = make(map[string]any, attHint(h))
		}
		switch {
		case f.Name == headerServiceGroup:
			att[kernel.KeyGroup] = f.Value
		case f.Name == headerServiceVersion:
			att[kernel.KeyVersion] = f.Value
		case f.Name == headerConsumerApp:
			att["remote.application"] = f.Value
		case strings.HasSuffix(f.Name, "-bin"):
			if b, err := decodeBinaryHeader(f.Value); err == nil {
				att[f.Name] = b
			}
		default:
			att[f.Name] = f.Value
		}
	}
	return att
}

// attHint sizes a call's attachments map: most of a request's header
// fields are HTTP/2's and gRPC's own, not attachments, and a map made for
// more than 8 entries is a table of several allocations where one for up
// to 8 is a single group (it grows if a call has more).
func attHint(h []hpackField) int { return min(len(h), 8) }

// addressed tells a gateway (an export of interface "*", which serves
// every service not exported here) which service a call is for.
func addressed(e *exporter, inv *kernel.Invocation, svc, group, version string) {
	if e.key != exports.Wildcard { // the export's key, set once: no URL lookup per call
		return
	}
	inv.SetAttachment(kernel.KeyInterface, svc)
	inv.SetAttachment(kernel.KeyGroup, group)
	inv.SetAttachment(kernel.KeyVersion, version)
}

// protoArg is a request message not decoded yet: its type is the method's
// parameter type, which only the service knows (kernel.Decodable).
type protoArg struct{ data []byte }

// DecodeAs decodes the message into a new value of t, a protobuf message
// type.
func (a *protoArg) DecodeAs(t reflect.Type) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer {
		if m, ok := reflect.New(t.Elem()).Interface().(proto.Message); ok {
			if err := proto.Unmarshal(a.data, m); err != nil {
				return reflect.Value{}, fmt.Errorf("protobuf %s: %w", t.Elem(), err)
			}
			return reflect.ValueOf(m), nil
		}
	}
	return reflect.Value{}, fmt.Errorf("the method takes %s, not a protobuf message: over Triple a method takes one protobuf message", t)
}

// Bytes are the message's encoding.
func (a *protoArg) Bytes() []byte { return a.data }

// Encoding says that Bytes are a protobuf message (kernel.Encoded).
func (a *protoArg) Encoding() string { return "proto" }

func gunzip(b []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("decompressed message over the payload limit of %d bytes", limit)
	}
	return out, nil
}
