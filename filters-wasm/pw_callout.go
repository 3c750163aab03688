package wasmfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// Callouts: proxy_http_call sends an HTTP request to an upstream the filter's
// config names (clusters: {name: "http://host:port"}), asynchronously, as
// Envoy does: the host function returns a token at once, the callback that
// made it returns PAUSE, and the call's goroutine waits for the answer (or
// the call's deadline), then runs proxy_on_http_call_response in the same
// instance with the answer's headers and body. The guest then resumes the
// call (proxy_continue_stream), answers it (proxy_send_local_response) or
// makes another callout. A call without deadline waits at most the filter's
// timeout. A failed callout (refused, timed out, too large) is answered
// with no headers and no body, as in Envoy.

// Bounds of a callout.
const (
	// DefaultMaxCallouts bounds the callouts in flight per filter (max_callouts).
	DefaultMaxCallouts = 16
	// maxCalloutBody bounds an answer's body read into the host.
	maxCalloutBody = 1 << 20
)

// callout is one proxy_http_call in flight, and then its answer.
type callout struct {
	token uint32
	// grpc: a proxy_grpc_call's; then status is its gRPC status, headers
	// its initial metadata, trailers its trailing metadata, body its
	// message, msg its grpc-message.
	grpc     bool
	trailers []hdr
	msg      string
	// atCallDeadline: the callout's deadline is its call's (the guest's
	// timeout was later), so its running out is the call's timeout.
	atCallDeadline bool
	status         int
	headers        []hdr
	body           []byte
	err            error
}

// newCalloutClient is a filter's HTTP client for callouts: its own
// connections (closed with the filter), no redirects followed (the guest
// sees the 3xx, as from Envoy).
func newCalloutClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// pwHTTPCall is proxy_http_call(upstream_p, upstream_n, headers_p,
// headers_n, body_p, body_n, trailers_p, trailers_n, timeout_ms, *token).
func pwHTTPCall(h *host, in *instance, ctx context.Context, s []uint64) {
	if !in.pwCanCallOut() {
		s[0] = pwBadArgument
		return
	}
	f := in.f
	up, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	hb, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	body, ok3 := in.read(uint32(s[4]), uint32(s[5]))
	if !ok1 || !ok2 || !ok3 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	base, known := f.pwCluster(up)
	if !known {
		s[0] = pwBadArgument
		return
	}
	hdrs, ok := parsePairs(hb)
	if !ok {
		s[0] = pwParseFailure
		return
	}
	if !f.pwTakeCallout() {
		s[0] = pwInternalFailure
		return
	}
	do, err := f.calloutFunc(base, hdrs, bytes.Clone(body))
	if err != nil {
		f.callouts.Add(-1)
		s[0] = pwBadArgument
		return
	}
	s[0] = in.pwStartCallout(&callout{}, do, uint32(s[8]), uint32(s[9]))
}

// pwStartCallout runs do, a callout the filter has counted (takeCallout),
// in its own goroutine for the call in: its answer comes to await as an
// event. timeoutMs bounds it (0: the filter's timeout), and the call's
// deadline; c's token goes to the guest at tokenPtr. It returns the host
// function's status.
func (in *instance) pwStartCallout(c *callout, do func(ctx context.Context) (int, []hdr, []byte, error), timeoutMs, tokenPtr uint32) uint64 {
	f, p := in.f, in.pw
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = f.timeout
	}
	p.nextToken++
	c.token = p.nextToken
	if p.events == nil {
		// One channel per call that makes callouts: an answer that comes
		// after its call ended (the deadline) lands in that call's
		// channel, never in a later call's.
		p.events = make(chan *callout, f.pw.maxCallouts)
	}
	// Not the call's context: a deadline's Done is made only on demand,
	// and the callout is cancelled when its call ends (pwInstance.end).
	d := time.Now().Add(timeout)
	if cd, ok := p.ctx.Deadline(); ok && !d.Before(cd) {
		d, c.atCallDeadline = cd, true
	}
	cctx, cancel := context.WithDeadline(context.Background(), d)
	p.pending++
	p.cancels = append(p.cancels, cancel)
	events := p.events
	go func() {
		c.status, c.headers, c.body, c.err = do(cctx)
		cancel()
		f.callouts.Add(-1)
		select {
		case events <- c:
		default: // its call has gone, with more unread answers than max_callouts
		}
	}()
	if !in.mem.WriteUint32Le(tokenPtr, c.token) {
		return pwInvalidMemoryAccess
	}
	return pwOK
}

// pwCluster is the base of the upstream a proxy-wasm callout names, from
// the filter's clusters; an unknown one is logged.
func (f *Filter) pwCluster(up []byte) (string, bool) {
	base, known := f.pw.clusters[string(up)]
	if !known {
		f.warn(warnUnimplemented, "weft: proxy-wasm filter called an upstream its config does not name (wasm.filters.<name>.clusters)",
			"upstream", clip(string(up)))
	}
	return base, known
}

// pwTakeCallout is takeCallout for a proxy-wasm filter, logging a refusal.
func (f *Filter) pwTakeCallout() bool {
	if f.takeCallout(f.pw.maxCallouts) {
		return true
	}
	f.warn(warnUnimplemented, "weft: proxy-wasm filter has max_callouts callouts in flight; one more was refused", "max_callouts", f.pw.maxCallouts)
	return false
}

// pwCanCallOut says whether the instance's guest may make a callout now:
// in a call's callbacks (the call waits for it) or in proxy_on_tick (the
// tick's round does, pw_tick.go); not at start-up, where nothing would
// hand it the answer.
func (in *instance) pwCanCallOut() bool {
	return in != nil && in.pw != nil && (in.inv != nil || in.pw.inTick)
}

// takeCallout counts one more callout of the filter in flight, unless max
// are already (max_callouts): false then, and nothing counted. The callout's
// end gives it back (f.callouts.Add(-1)). Both ABIs' callouts share it.
func (f *Filter) takeCallout(max int) bool {
	if f.callouts.Add(1) > int64(max) {
		f.callouts.Add(-1)
		return false
	}
	return true
}

// calloutFunc is the callout to the cluster base, an http(s) URL or
// ref:<reference id>, with the guest's headers (pseudo-headers :method,
// :path, :authority) and body (owned by the callout); the error is a
// request that cannot be built. Both ABIs' callouts go through it.
func (f *Filter) calloutFunc(base string, hdrs []hdr, body []byte) (func(ctx context.Context) (int, []hdr, []byte, error), error) {
	if ref, isRef := strings.CutPrefix(base, refPrefix); isRef {
		return f.refCallout(ref, hdrs, body), nil
	}
	req, err := calloutRequest(base, hdrs, body)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (int, []hdr, []byte, error) { return doCallout(ctx, f.httpClient, req) }, nil
}

// refPrefix marks a cluster that names a weft reference of the App
// (clusters: {users: "ref:userService"}) rather than an HTTP server.
const refPrefix = "ref:"

// References finds the App's references by id, for callouts to them.
type References func(id string) (kernel.Invoker, error)

// SetReferences gives the filter the App's references (the App sets it once
// they exist; callouts to a ref: cluster fail until then).
func (f *Filter) SetReferences(r References) { f.refs.Store(&r) }

// refCallout is a callout to a weft reference: the method is the last
// segment of :path (/<interface>/<method>, or /<method>), the body a JSON
// array of the arguments (as a generic call takes them; an empty body: no
// arguments), the other headers the call's attachments. The answer is HTTP
// 200 with the result as JSON and its attachments as headers; an error is
// the HTTP status of its code with grpc-status and grpc-message headers (a
// Trailers-Only answer, as gRPC sends an error without a body).
func (f *Filter) refCallout(ref string, hdrs []hdr, body []byte) func(ctx context.Context) (int, []hdr, []byte, error) {
	return func(ctx context.Context) (int, []hdr, []byte, error) {
		rp := f.refs.Load()
		if rp == nil {
			return 0, nil, nil, fmt.Errorf("reference %q: the App's references are not ready", ref)
		}
		iv, err := (*rp)(ref)
		if err != nil {
			return 0, nil, nil, err
		}
		method := ""
		inv := kernel.NewInvocation("")
		for _, h := range hdrs {
			switch k := strings.ToLower(h.k); {
			case k == ":path":
				p, _, _ := strings.Cut(h.v, "?")
				method = p[strings.LastIndexByte(p, '/')+1:]
			case strings.HasPrefix(k, ":"), k == "content-type", k == "content-length":
			default:
				inv.SetAttachment(h.k, h.v)
			}
		}
		if method == "" {
			return 0, nil, nil, fmt.Errorf("reference %q: no method in :path (want /<interface>/<method>)", ref)
		}
		inv.Method = method
		if len(bytes.TrimSpace(body)) > 0 {
			var args []any
			if err := json.Unmarshal(body, &args); err != nil {
				return 0, nil, nil, fmt.Errorf("reference %q: the body is not a JSON array of arguments: %v", ref, err)
			}
			inv.Args = args
		}
		res, err := iv.Invoke(ctx, inv)
		if err != nil {
			code := kernel.CodeOf(err)
			return refHTTPStatus(code), []hdr{{":status", strconv.Itoa(refHTTPStatus(code))},
				{"content-type", "application/json"},
				{"grpc-status", strconv.Itoa(kernel.GRPCStatus(code))}, {"grpc-message", err.Error()}}, nil, nil
		}
		out := []hdr{{":status", "200"}, {"content-type", "application/json"}, {"grpc-status", "0"}}
		out = appendAttachments(out, res.Attachments)
		return 200, out, appendJSON(nil, res.Value), nil
	}
}

// refHTTPStatus is the HTTP status a reference callout answers for a weft
// error code, as Envoy's gRPC-JSON transcoder maps gRPC statuses.
func refHTTPStatus(code kernel.Code) int {
	switch code {
	case kernel.CodeForbidden:
		return http.StatusForbidden
	case kernel.CodeTimeout:
		return http.StatusGatewayTimeout
	case kernel.CodeNetwork, kernel.CodeNoProvider, kernel.CodeShuttingDown:
		return http.StatusServiceUnavailable
	case kernel.CodeLimitExceeded:
		return http.StatusTooManyRequests
	case kernel.CodeMethodNotFound, kernel.CodeServiceNotFound:
		return http.StatusNotFound
	case kernel.CodeBiz:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// calloutRequest builds the HTTP request of a callout to base from the
// guest's headers: :method (default GET), :path (default /), :authority
// (default base's host); the others as they are.
func calloutRequest(base string, hdrs []hdr, body []byte) (*http.Request, error) {
	method, path, authority := "GET", "/", ""
	rest := make([]hdr, 0, len(hdrs))
	for _, h := range hdrs {
		switch strings.ToLower(h.k) {
		case ":method":
			method = h.v
		case ":path":
			path = h.v
		case ":authority", "host":
			authority = h.v
		case ":scheme":
		default:
			rest = append(rest, h)
		}
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range rest {
		req.Header.Add(h.k, h.v)
	}
	if authority != "" {
		req.Host = authority
	}
	return req, nil
}

func doCallout(ctx context.Context, client *http.Client, req *http.Request) (int, []hdr, []byte, error) {
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCalloutBody+1))
	if err != nil {
		return 0, nil, nil, err
	}
	if len(body) > maxCalloutBody {
		return 0, nil, nil, fmt.Errorf("answer over %d bytes", maxCalloutBody)
	}
	hdrs := []hdr{{":status", strconv.Itoa(resp.StatusCode)}}
	for k, vs := range resp.Header {
		for _, v := range vs {
			hdrs = append(hdrs, hdr{strings.ToLower(k), v})
		}
	}
	return resp.StatusCode, hdrs, body, nil
}

// await follows a callback that paused the call (act) while callouts are in
// flight: each answer goes to proxy_on_http_call_response, until the guest
// resumes or answers the call, or nothing is pending any more, or the
// call's deadline (the filter's timeout without one). It returns the
// verdict as verdict does, or the guest's failure (err).
func (in *instance) await(ctx context.Context, act uint32, what string) (rej, err error) {
	p := in.pw
	var timeout <-chan time.Time
	for {
		if rej := in.verdictNoPause(act); rej != nil || p.resumed || act == pwContinue || act == pwContinueAndEndStr {
			return rej, nil
		}
		if p.pending == 0 {
			return in.verdict(act, what), nil
		}
		if timeout == nil && ctx.Done() == nil {
			t := time.NewTimer(in.f.timeout)
			defer t.Stop()
			timeout = t.C
		}
		var c *callout
		select {
		case c = <-p.events:
		case <-ctx.Done():
			return kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "wasm filter %q: the call's deadline passed while it waited for its callouts (%s paused it)", in.f.name, what), nil
		case <-timeout:
			return kernel.Errorf(kernel.CodeTimeout, "wasm filter %q: its callouts did not answer within the filter's timeout of %v (%s paused the call)", in.f.name, in.f.timeout, what), nil
		}
		p.pending--
		if err := ctx.Err(); err != nil || c.atCallDeadline && errors.Is(c.err, context.DeadlineExceeded) {
			// The callout ran out with the call's deadline: the call has
			// timed out, whatever the filter would make of an empty
			// answer (the two timers fire in either order).
			return kernel.Wrap(kernel.CodeTimeout, context.DeadlineExceeded, "wasm filter %q: the call's deadline passed while it waited for its callouts (%s paused it)", in.f.name, what), nil
		}
		if c.grpc {
			if err := in.pwGRPCAnswer(ctx, c); err != nil {
				return nil, err
			}
			act = pwPause
			continue
		}
		if err := in.pwHTTPAnswer(ctx, c); err != nil {
			return nil, err
		}
		act = pwPause // the call stays paused until the guest says otherwise
	}
}

// pwHTTPAnswer hands an HTTP callout's answer to the guest's root context
// (proxy_on_http_call_response); a failed callout is an empty answer.
func (in *instance) pwHTTPAnswer(ctx context.Context, c *callout) error {
	p := in.pw
	p.answer = c
	defer func() { p.answer = nil }()
	nh, nb := uint32(len(c.headers)), uint32(len(c.body))
	if c.err != nil {
		in.f.warn(warnCallout, "weft: proxy-wasm filter's callout failed; the filter gets an empty answer", "error", c.err.Error())
		nh, nb = 0, 0
	}
	_, err := in.pwCall(ctx, p.onHTTPCallResponse, pwOnHTTPCallResponse, in.f.rootCtx, c.token, nh, nb, 0)
	return err
}

// verdictNoPause is verdict for the answers that end a pause: a local
// response or a closed stream; nil otherwise.
func (in *instance) verdictNoPause(act uint32) error {
	p := in.pw
	if p.local == nil && !p.closed {
		return nil
	}
	return in.verdict(act, "a callback")
}

// clip bounds a guest's string in a log line.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "..."
	}
	return s
}
