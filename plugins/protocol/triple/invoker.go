package triple

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// URL parameters the consumer side reads.
const (
	KeyReconnect = "reconnect"
)

// sharedClient is the connection to one provider address, shared by the
// references to it (exports.Clients), with its codec's calls.
type sharedClient struct {
	c     *netty.ExchangeClient
	codec *clientCodec
}

// CloseGracefully closes once the calls in flight have ended.
func (sc *sharedClient) CloseGracefully(max time.Duration) { sc.c.CloseGracefully(max) }

// Close closes now.
func (sc *sharedClient) Close() { sc.c.Close() }

// Refer connects to the Triple provider url describes, sharing one
// connection per provider address, as gRPC and Dubbo do.
func (p *Protocol) Refer(_ context.Context, url *kernel.URL) (kernel.Invoker, error) {
	// Wrapped (non-IDL) calls go in the reference's `serialization`:
	// hessian2 unless a plugin's is named.
	ws := hessianWire
	if name := url.Param(kernel.KeySerialization); name != "" && !isHessian(name) && !isIDL(name) && name != "protobuf" {
		if p.sers == nil {
			return nil, fmt.Errorf("weft: tri: serialization %q: this protocol was built with hessian2 and protobuf only", name)
		}
		ser, err := p.sers.Serialization(name)
		if err != nil {
			return nil, fmt.Errorf("weft: tri: %w", err)
		}
		ws = wireSer{ser, name}
	}
	addr := url.Address()
	sc := p.clients.Hold(extension.SecurityShareKey(url), func() *sharedClient {
		payload := int(url.ParamInt(kernel.KeyPayload, DefaultPayload))
		if payload <= 0 {
			payload = DefaultPayload
		}
		codec := &clientCodec{codec: codec{maxFrame: h2.DefaultMaxFrame}, calls: map[uint64]*cstream{}}
		opt := netty.ClientOptions{
			// Heartbeats are HTTP/2 PINGs (clientCodec.Encode): a
			// connection silent for three is closed and reconnected.
			Heartbeat: time.Duration(url.ParamInt("heartbeat", int64(netty.DefaultHeartbeat/time.Millisecond))) * time.Millisecond,
			Reconnect: time.Duration(url.ParamInt(KeyReconnect, int64(netty.DefaultReconnect/time.Millisecond))) * time.Millisecond,
			Framing: func(ec *netty.ExchangeClient) extension.ChannelHandler {
				return &clientFraming{ec: ec, codec: codec, payload: payload}
			},
		}
		return &sharedClient{c: netty.NewExchangeClient(p.t, url, codec, opt), codec: codec}
	})
	iv := &invoker{p: p, url: url, addr: addr, sc: sc, scheme: "http", ws: ws, payload: int(url.ParamInt(kernel.KeyPayload, DefaultPayload))}
	if iv.payload <= 0 {
		iv.payload = DefaultPayload
	}
	if p.tls || url.Param(extension.KeySecurity) != "" {
		iv.scheme = "https"
	}
	iv.fixed = iv.fixedHeaders("application/grpc+proto")
	iv.fixedHessian = iv.fixedHeaders("application/grpc+" + ws.name)
	return iv, nil
}

type invoker struct {
	p       *Protocol
	url     *kernel.URL
	addr    string
	payload int
	paths   sync.Map // method -> *methodFields
	sc      *sharedClient
	scheme  string
	fixed   []byte // the header fields every call sends after :path
	// fixedHessian is fixed for non-IDL calls, whose serialization is ws.
	fixedHessian []byte
	ws           wireSer
	destroyed    atomic.Bool
}

func (iv *invoker) URL() *kernel.URL { return iv.url }

func (iv *invoker) IsAvailable() bool { return !iv.destroyed.Load() && iv.sc.c.IsAvailable() }

// WhyUnavailable is kernel.WhyUnavailable: the client's reason.
func (iv *invoker) WhyUnavailable() error {
	if iv.destroyed.Load() {
		return kernel.Errorf(kernel.CodeNetwork, "invoker of %s at %s is destroyed", iv.url.ServiceKey(), iv.url.Address())
	}
	return iv.sc.c.Unavailable()
}

func (iv *invoker) Destroy() {
	if !iv.destroyed.Swap(true) {
		iv.p.clients.Release(extension.SecurityShareKey(iv.url), iv.sc)
	}
}

// fixedHeaders are the fields of every call of this invoker: scheme,
// authority, content type, the consumer's application, and the provider
// URL's parameters every call sends (kernel.InvokerAttachments) but the
// per-method ones (methodFields).
func (iv *invoker) fixedHeaders(contentType string) []byte {
	var hb []byte
	hb = h2.AppendField(hb, ":scheme", iv.scheme)
	hb = h2.AppendField(hb, ":authority", iv.url.Address())
	hb = h2.AppendField(hb, "content-type", contentType)
	hb = h2.AppendField(hb, "te", "trailers")
	hb = h2.AppendField(hb, "grpc-accept-encoding", "gzip")
	hb = h2.AppendField(hb, "user-agent", "weft-triple")
	if a := iv.url.Param(kernel.KeyApplication); a != "" && validHeaderValue(a) {
		hb = h2.AppendField(hb, headerConsumerApp, a)
	}
	for _, a := range kernel.InvokerAttachments {
		if !a.PerMethod {
			hb = appendURLAttachment(hb, a.Key, a.Value(iv.url, ""))
		}
	}
	return hb
}

// appendURLAttachment appends one of kernel.InvokerAttachments as Dubbo 3's
// TripleInvoker sends it: path and interface not at all (:path names the
// service, and the provider takes them from it), group and version in
// Triple's own headers, the others (token, timeout) as metadata under
// their key.
func appendURLAttachment(hb []byte, key, value string) []byte {
	if value == "" || !validHeaderValue(value) {
		return hb
	}
	switch key {
	case kernel.KeyPath, kernel.KeyInterface:
		return hb
	case kernel.KeyGroup:
		return h2.AppendField(hb, headerServiceGroup, value)
	case kernel.KeyVersion:
		return h2.AppendField(hb, headerServiceVersion, value)
	}
	return h2.AppendField(hb, key, value)
}

// methodFields are the header fields of every call of one method, encoded:
// its :path, and the per-method attachments of kernel.InvokerAttachments
// (Dubbo's `timeout`, the configured one, which Dubbo 3 sends beside
// grpc-timeout), which go after the pseudo-header fields.
type methodFields struct{ path, attachments []byte }

func (iv *invoker) methodFields(method string) *methodFields {
	if m, ok := iv.paths.Load(method); ok {
		return m.(*methodFields)
	}
	m := &methodFields{path: h2.AppendField(nil, ":path", "/"+iv.url.Interface()+"/"+method)}
	for _, a := range kernel.InvokerAttachments {
		if a.PerMethod {
			m.attachments = appendURLAttachment(m.attachments, a.Key, a.Value(iv.url, method))
		}
	}
	v, _ := iv.paths.LoadOrStore(method, m)
	return v.(*methodFields)
}

// Invoke calls the method as a unary gRPC call: its one argument, a
// protobuf message, is the request; the answer's Value decodes into the
// caller's result type (kernel.Decodable), or is read with Bytes.
func (iv *invoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	timeout := iv.url.MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond)
	wait := timeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait <= 0 {
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeTimeout, Cause: context.DeadlineExceeded,
			Msg: fmt.Sprintf("no time left to call %s.%s on %s", iv.url.ServiceKey(), inv.Method, iv.url.Address())}
	}
	if k, ok := inv.Attribute(kernel.AttrStream); ok {
		return iv.openStream(ctx, inv, k.(kernel.StreamKind), wait)
	}
	// One protobuf message is an IDL call; anything else goes wrapped,
	// hessian2 (Dubbo 3's non-IDL form).
	var msg []byte
	nonIDL := true
	if len(inv.Args) == 1 {
		switch a := inv.Args[0].(type) {
		case proto.Message:
			var err error
			// The message is copied into the connection's buffer by the
			// send, never kept: its buffer is reused (msgPool).
			bp := msgPool.Get().(*[]byte)
			defer func() {
				if cap(msg) <= 64<<10 {
					*bp = msg[:0]
					msgPool.Put(bp)
				}
			}()
			if msg, err = (proto.MarshalOptions{}).MarshalAppend((*bp)[:5], a); err != nil {
				return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s.%s: request", iv.url.ServiceKey(), inv.Method)
			}
			nonIDL = false
		case *protoArg: // a provider passing a call on as it came
			msg = append(make([]byte, 5, 5+len(a.data)), a.data...)
			nonIDL = false
		}
	}
	if nonIDL {
		var err error
		if msg, err = wrapArgs(make([]byte, 5, 64), inv.Args, inv.ParamTypes, iv.ws); err != nil {
			return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s.%s: request", iv.url.ServiceKey(), inv.Method)
		}
	}
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-5))

	hb := iv.headersFor(inv, wait, nonIDL)
	req := &clientCall{headers: hb, msg: msg}

	c := iv.sc.c
	resp, err := c.Request(ctx, req, wait)
	if err != nil {
		if ke := (*kernel.Error)(nil); errors.As(err, &ke) && (ke.Code == kernel.CodeTimeout || errors.Is(err, context.Canceled)) {
			iv.sc.codec.cancel(req.reqID)
		}
		return kernel.Result{}, err
	}
	if resp.Status != kernel.ResponseOK {
		return kernel.Result{}, kernel.ResponseError(resp.Status, resp.ErrMsg)
	}
	r := resp.Data.(*clientReply)
	if r.err != nil {
		return kernel.Result{}, r.err
	}
	res, err := iv.result(r)
	if err == nil && nonIDL {
		if res.Value, err = unwrapResult(res.Value.(*protoArg).data, iv.ws); err != nil {
			return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s answered", iv.addr)
		}
	}
	return res, err
}

// headersFor is the header block of a call of method.
func (iv *invoker) headersFor(inv *kernel.Invocation, wait time.Duration, nonIDL bool) []byte {
	m := iv.methodFields(inv.Method)
	hb := make([]byte, 0, 96+len(m.path)+len(m.attachments)+len(iv.fixed))
	hb = append(hb, 0x83) // :method POST, static table entry 3
	hb = append(hb, m.path...)
	if nonIDL {
		hb = append(hb, iv.fixedHessian...)
	} else {
		hb = append(hb, iv.fixed...)
	}
	hb = append(hb, m.attachments...)
	hb = h2.AppendField(hb, "grpc-timeout", formatTimeout(wait))
	return appendMetadata(hb, inv.Attachments())
}

// openStream opens a streaming call and returns its stream as the
// Result's Value (kernel.ClientStream) once the stream is on the wire; a
// goroutine waits for its end, as Request waits for a unary answer.
func (iv *invoker) openStream(ctx context.Context, inv *kernel.Invocation, kind kernel.StreamKind, wait time.Duration) (kernel.Result, error) {
	call := &clientCall{headers: iv.headersFor(inv, wait, false)}
	if kind == kernel.ServerStreaming {
		m, ok := firstMessage(inv.Args)
		if !ok {
			return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s.%s streams answers to one protobuf message, got %d arguments", iv.url.ServiceKey(), inv.Method, len(inv.Args))
		}
		msg, err := (proto.MarshalOptions{}).MarshalAppend(make([]byte, 5, 5+proto.Size(m)), m)
		if err != nil {
			return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s.%s: request", iv.url.ServiceKey(), inv.Method)
		}
		binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-5))
		call.msg = msg
	}
	cs := newClientStream(ctx, kind, iv.payload)
	call.stream = cs
	c := iv.sc.c
	go func() {
		resp, err := c.Request(ctx, call, wait)
		switch {
		case err != nil:
			if ke := (*kernel.Error)(nil); errors.As(err, &ke) && (ke.Code == kernel.CodeTimeout || errors.Is(err, context.Canceled)) {
				iv.sc.codec.cancel(call.reqID)
			}
			cs.end(err)
		case resp.Status != kernel.ResponseOK:
			cs.end(kernel.ResponseError(resp.Status, resp.ErrMsg))
		default:
			r := resp.Data.(*clientReply)
			if r.err != nil {
				cs.end(r.err)
				return
			}
			r.data = []byte{0, 0, 0, 0, 0} // the answers went to the stream
			_, err := iv.result(r)
			cs.end(err)
		}
	}()
	select {
	case <-cs.ready:
		return kernel.Result{Value: cs}, nil
	case <-cs.endCh:
		return kernel.Result{}, cs.err
	}
}

func firstMessage(args []any) (proto.Message, bool) {
	if len(args) != 1 {
		return nil, false
	}
	m, ok := args[0].(proto.Message)
	return m, ok
}

// result reads a finished stream: the status in its trailers, its message
// and its metadata as attachments.
func (iv *invoker) result(r *clientReply) (kernel.Result, error) {
	addr := iv.addr
	if s := header(r.headers, ":status"); s != "200" {
		return kernel.Result{}, httpStatusError(s, addr)
	}
	att := attachmentsOf(r.trailers)
	st := header(r.trailers, "grpc-status")
	code, err := strconv.Atoi(st)
	if err != nil {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s answered without a valid grpc-status (%q)", addr, view.Cut(st, 64))
	}
	if code != statusOK {
		text := decodeMessage(header(r.trailers, "grpc-message"))
		kc := codeOfGRPCStatus(code)
		if v := header(r.trailers, headerExceptionCode); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < 64 {
				kc = kernel.Code(n)
			}
		}
		if kc == kernel.CodeBiz || (kc == kernel.CodeUnknown && header(r.trailers, headerExceptionCode) == "") && code == statusUnknown {
			// An application error (the service returned it): what a
			// Dubbo provider's exception and a gRPC UNKNOWN are.
			se := &StatusError{Code: code, Message: text}
			if d := header(r.trailers, "grpc-status-details-bin"); d != "" {
				se.Details, _ = decodeBinaryHeader(d)
			}
			return kernel.Result{Attachments: att}, kernel.BizError(se)
		}
		// A weft provider writes its framework errors as they read
		// ("weft: forbidden: ..."), for gRPC and Java peers, which have
		// the status only; the code is this error's, said once.
		if c, msg, ok := kernel.ParseText(text); ok && c == kc {
			text = msg
		}
		return kernel.Result{Attachments: att}, &kernel.Error{Code: kc, Msg: fmt.Sprintf("%s: %s (gRPC status %d)", addr, text, code)}
	}
	if len(r.data) < 5 {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s answered status OK without a message", addr)
	}
	if n := int(binary.BigEndian.Uint32(r.data[1:])); n != len(r.data)-5 {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s answered a message that says %d bytes and has %d", addr, n, len(r.data)-5)
	}
	msg := r.data[5:]
	if r.data[0] != 0 {
		// Compressed: this consumer says it takes gzip
		// (grpc-accept-encoding), and takes nothing else.
		if enc := header(r.headers, "grpc-encoding"); enc != "gzip" {
			return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "%s answered a message compressed with %q; this consumer reads gzip", addr, view.Cut(enc, 64))
		}
		var err error
		if msg, err = gunzip(msg, iv.payload); err != nil {
			return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "%s answered", addr)
		}
	}
	return kernel.Result{Value: &protoArg{data: msg}, Attachments: att}, nil
}

// msgPool recycles the buffers consumers marshal their request messages
// into; those over 64 KiB are dropped.
var msgPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// StatusError is a gRPC status a provider answered with, as the business
// error of a call (what a service returned; Code says which).
type StatusError struct {
	Code    int
	Message string
	// Details is grpc-status-details-bin: a google.rpc.Status, encoded,
	// when the provider sent one (rich error details).
	Details []byte
}

func (e *StatusError) Error() string {
	if strings.TrimSpace(e.Message) == "" {
		return fmt.Sprintf("gRPC status %d", e.Code)
	}
	return e.Message
}
