package wasmfilter

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/weftrpc/weft/kernel"
)

// proxy_grpc_call: a unary gRPC call to an upstream of the filter's
// clusters, asynchronous as proxy_http_call is (pw_callout.go: the same
// max_callouts, deadline and pause), answered by
// proxy_on_grpc_receive_initial_metadata, proxy_on_grpc_receive (the
// message in buffer GRPC_RECEIVE_BUFFER), proxy_on_grpc_receive_trailing_
// metadata and proxy_on_grpc_close (the gRPC status; its message by
// proxy_get_status). The upstream is the cluster's name (Envoy's
// envoy_grpc.cluster_name); the cluster is an http(s) URL of a gRPC server,
// called over HTTP/2 (cleartext for http://, TLS with ALPN h2 for
// https://), or ref:<reference id>, a weft reference called with the
// message as its one protobuf argument (a Triple reference, so that the
// bytes cross as they are).

// pwMapGRPCInitial and pwMapGRPCTrailing are proxy_map_type_t's gRPC
// metadata maps; pwBufGRPCReceive the received message's buffer.
const (
	pwMapGRPCInitial  = 4
	pwMapGRPCTrailing = 5
	pwBufGRPCReceive  = 5
)

// gRPC statuses the host answers with itself.
const (
	grpcUnavailable      = 14
	grpcDeadlineExceeded = 4
	grpcInternal         = 13
)

// newGRPCClient is a filter's HTTP/2 client for gRPC callouts: prior
// knowledge HTTP/2 over cleartext for http:// clusters, HTTP/2 over TLS for
// https:// ones (Go's own HTTP/2, as net/http has since Go 1.24).
func newGRPCClient() *http.Client {
	var protocols http.Protocols
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols: &protocols, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
		DialContext:     (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig: &tls.Config{NextProtos: []string{"h2"}},
	}}
}

// pwGRPCCall is proxy_grpc_call(upstream_p, upstream_n, service_p,
// service_n, method_p, method_n, metadata_p, metadata_n, message_p,
// message_n, timeout_ms, *token).
func pwGRPCCall(h *host, in *instance, ctx context.Context, s []uint64) {
	if !in.pwCanCallOut() {
		s[0] = pwBadArgument
		return
	}
	f := in.f
	up, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	svc, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	method, ok3 := in.read(uint32(s[4]), uint32(s[5]))
	md, ok4 := in.read(uint32(s[6]), uint32(s[7]))
	msg, ok5 := in.read(uint32(s[8]), uint32(s[9]))
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	base, known := f.pwCluster(up)
	if !known {
		s[0] = pwBadArgument
		return
	}
	if len(svc) == 0 || len(method) == 0 {
		f.warn(warnUnimplemented, "weft: proxy-wasm filter's proxy_grpc_call names no service or no method",
			"service", clip(string(svc)), "method", clip(string(method)))
		s[0] = pwBadArgument
		return
	}
	meta, ok := parsePairs(md)
	if !ok {
		s[0] = pwParseFailure
		return
	}
	if !f.pwTakeCallout() {
		s[0] = pwInternalFailure
		return
	}
	c := &callout{grpc: true}
	service, name, message := string(svc), string(method), bytes.Clone(msg)
	var do func(ctx context.Context) (int, []hdr, []byte, error)
	if ref, isRef := strings.CutPrefix(base, refPrefix); isRef {
		do = func(ctx context.Context) (int, []hdr, []byte, error) {
			return f.grpcRefCallout(ctx, c, ref, name, meta, message)
		}
	} else {
		url := strings.TrimSuffix(base, "/") + "/" + service + "/" + name
		do = func(ctx context.Context) (int, []hdr, []byte, error) {
			return f.grpcHTTPCallout(ctx, c, url, meta, message)
		}
	}
	s[0] = in.pwStartCallout(c, do, uint32(s[10]), uint32(s[11]))
}

// grpcHTTPCallout calls a gRPC server: one uncompressed message, the
// answer's status from its trailers (or its headers, for a Trailers-Only
// answer). It fills c's gRPC fields and answers as calloutFunc's functions
// do (the status there is the gRPC status).
func (f *Filter) grpcHTTPCallout(ctx context.Context, c *callout, url string, meta []hdr, msg []byte) (int, []hdr, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(grpcFrame(msg)))
	if err != nil {
		return 0, nil, nil, err
	}
	for _, h := range meta {
		if !strings.HasPrefix(h.k, ":") {
			req.Header.Add(h.k, h.v)
		}
	}
	req.Header.Set("content-type", "application/grpc")
	req.Header.Set("te", "trailers")
	if d, ok := ctx.Deadline(); ok {
		req.Header.Set("grpc-timeout", kernel.FormatGRPCTimeout(time.Until(d)))
	}
	f.grpcOnce.Do(func() { f.grpcHTTP = newGRPCClient() })
	resp, err := f.grpcHTTP.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCalloutBody+6))
	if err != nil {
		return 0, nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, nil, fmt.Errorf("%s answered HTTP %d, not a gRPC answer", url, resp.StatusCode)
	}
	headers := lowerHeaders(resp.Header)
	trailers := lowerHeaders(resp.Trailer)
	status, msgText := grpcStatusOf(trailers)
	if status < 0 {
		status, msgText = grpcStatusOf(headers)
	}
	if status < 0 {
		return 0, nil, nil, fmt.Errorf("%s answered without grpc-status", url)
	}
	c.trailers, c.msg = trailers, msgText
	var message []byte
	if status == 0 {
		if message, err = grpcUnframe(body); err != nil {
			return 0, nil, nil, fmt.Errorf("%s: the answer is %w", url, err)
		}
		if len(message) > maxCalloutBody {
			return 0, nil, nil, fmt.Errorf("answer over %d bytes", maxCalloutBody)
		}
	}
	return status, headers, message, nil
}

func lowerHeaders(h http.Header) []hdr {
	out := make([]hdr, 0, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, hdr{strings.ToLower(k), v})
		}
	}
	return out
}

// grpcStatusOf is the grpc-status and grpc-message in kv; -1 without one.
func grpcStatusOf(kv []hdr) (int, string) {
	status, msg := -1, ""
	for _, h := range kv {
		switch h.k {
		case "grpc-status":
			if n, err := strconv.Atoi(h.v); err == nil && n >= 0 {
				status = n
			}
		case "grpc-message":
			msg = h.v
		}
	}
	return status, msg
}

// grpcRefCallout calls a weft reference with the message as its one
// protobuf argument, carried as it is (the unknown fields of an empty
// message, which protobuf writes back byte for byte), the metadata as
// attachments.
func (f *Filter) grpcRefCallout(ctx context.Context, c *callout, ref, method string, meta []hdr, msg []byte) (int, []hdr, []byte, error) {
	rp := f.refs.Load()
	if rp == nil {
		return 0, nil, nil, fmt.Errorf("reference %q: the App's references are not ready", ref)
	}
	iv, err := (*rp)(ref)
	if err != nil {
		return 0, nil, nil, err
	}
	if err := wireFormat(msg); err != nil {
		return 0, nil, nil, fmt.Errorf("reference %q: the message is %w", ref, err)
	}
	arg := &emptypb.Empty{}
	arg.ProtoReflect().SetUnknown(msg)
	inv := kernel.NewInvocation(method, arg)
	for _, h := range meta {
		if !strings.HasPrefix(h.k, ":") {
			inv.SetAttachment(h.k, h.v)
		}
	}
	res, err := iv.Invoke(ctx, inv)
	if err != nil {
		c.msg = err.Error()
		return kernel.GRPCStatus(kernel.CodeOf(err)), nil, nil, nil
	}
	var out []byte
	switch v := res.Value.(type) {
	case rawMessage:
		out = bytes.Clone(v.Bytes())
	case proto.Message:
		if out, err = proto.Marshal(v); err != nil {
			return 0, nil, nil, err
		}
	default:
		c.msg = fmt.Sprintf("reference %q answered %T, not a protobuf message", ref, res.Value)
		return grpcInternal, nil, nil, nil
	}
	return 0, appendAttachments(nil, res.Attachments), out, nil
}

// pwGRPCAnswer hands a gRPC callout's answer to the guest, in Envoy's
// order: the initial metadata, the message, the trailing metadata (each
// only on success, each callback only if exported), then close with the
// status, which proxy_get_status reads back with its message. A callout
// that failed (unreachable, refused) closes with UNAVAILABLE, or
// DEADLINE_EXCEEDED when its own timeout ran out.
func (in *instance) pwGRPCAnswer(ctx context.Context, c *callout) error {
	p := in.pw
	if c.err != nil {
		in.f.warn(warnCallout, "weft: proxy-wasm filter's gRPC callout failed; the filter gets its close with a status", "error", c.err.Error())
		c.status, c.msg = grpcUnavailable, c.err.Error()
		if errors.Is(c.err, context.DeadlineExceeded) {
			c.status = grpcDeadlineExceeded
		}
		c.headers, c.trailers, c.body = nil, nil, nil
	}
	p.answer = c
	defer func() { p.answer = nil }()
	if c.status == 0 {
		for _, step := range []struct {
			fn   api.Function
			name string
			n    int
		}{
			{p.onGRPCInitial, pwOnGRPCInitial, len(c.headers)},
			{p.onGRPCReceive, pwOnGRPCReceive, len(c.body)},
			{p.onGRPCTrailing, pwOnGRPCTrailing, len(c.trailers)},
		} {
			if _, err := in.pwCall(ctx, step.fn, step.name, in.f.rootCtx, c.token, uint32(step.n)); err != nil {
				return err
			}
			if p.local != nil || p.closed || p.resumed {
				return nil // the guest has decided the call
			}
		}
	}
	_, err := in.pwCall(ctx, p.onGRPCClose, pwOnGRPCClose, in.f.rootCtx, c.token, uint32(c.status))
	return err
}

// pwGetStatus is proxy_get_status(*code, *message_ptr, *message_len): the
// status of the gRPC callout being answered.
func pwGetStatus(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil || in.pw.answer == nil || !in.pw.answer.grpc {
		s[0] = pwNotFound
		return
	}
	c := in.pw.answer
	if st := pwWriteU32(in, uint32(s[0]), uint32(c.status)); st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwReturn(in, ctx, uint32(s[1]), uint32(s[2]), []byte(c.msg))
}
