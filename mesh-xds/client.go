package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Client is an ADS client (state of the world) of one management server,
// shared by every watch of one registry: one gRPC stream carries the
// listeners, routes, clusters and endpoints weft asks for, as grpc-go's
// proxyless client does (gRFC A27):
//
//   - each response is ACKed with its version and nonce, or NACKed with
//     the last version ACKed and an error_detail naming each bad resource;
//     the good resources of a NACKed response are still taken (A46);
//   - the last good value of every resource is kept across the control
//     plane's outages; a lost stream is opened again with a backoff
//     (1 s × 1.6ⁿ ± 20%, at most 2 min), every name asked again with the
//     last version ACKed;
//   - a resource the server never sends is "not found" 15 s after it was
//     asked, while connected;
//   - a listener or cluster missing from a response of its type is
//     deleted, unless the server's feature ignore_resource_deletion;
//   - the next response is read only once the last one was applied, so a
//     flood of updates holds at most one in memory.
type Client struct {
	srv  Server
	node *corev3.Node
	log  *slog.Logger
	conn *grpc.ClientConn

	mu     sync.Mutex
	types  map[string]*typeState
	kick   chan struct{}
	stats  Stats
	cancel context.CancelFunc
	done   chan struct{}
	// streaming: a stream is open (not-found timers run only then).
	streaming bool
	nextID    int
}

// Stats count what the client did, for tests and QoS.
type Stats struct {
	Streams, Responses, ACKs, NACKs int
	// LastNACK is the error_detail of the last NACK.
	LastNACK string
}

// maxResponse bounds a response's size; a control plane that sends more
// is refused by gRPC's message limit (the stream fails and is opened
// again).
const maxResponse = 16 << 20

// maxResources bounds the resources of one response.
const maxResources = 100_000

// NotFoundTimeout is how long a resource asked for may stay unanswered
// before it is taken not to exist (the xDS protocol's 15 s).
var NotFoundTimeout = 15 * time.Second

// Backoff bounds, grpc-go's.
var (
	backoffBase = time.Second
	backoffMax  = 2 * time.Minute
)

type typeState struct {
	url         string
	decode      func(*anypb.Any) (string, any, error)
	allRequired bool // listeners and clusters: a response lists them all
	version     string
	nonce       string
	send        bool   // a request is due
	answer      bool   // it answers a response (ACK or NACK)
	nack        string // the error_detail of the due request, "" for an ACK
	watches     map[string]*watch
	// Delta only: names to subscribe and unsubscribe in the next request.
	subscribe, unsubscribe map[string]bool
}

type watch struct {
	version  string // delta: the resource's version
	value    any
	has      bool
	missing  bool // known not to exist
	fns      map[int]func(v any, exists bool)
	timer    *time.Timer
	timerSeq int
}

// NewClient dials srv (lazily: gRPC connects on the stream) and starts the
// stream; Close stops it. It knows no certificate provider instances, so
// it NACKs a secured cluster: a registry's client has its bootstrap's.
func NewClient(srv Server, node Node, log *slog.Logger) (*Client, error) {
	return newClient(srv, node, nil, log)
}

// newClient is NewClient for a bootstrap whose certificate provider
// instances are certs: a secured cluster naming another is NACKed.
func newClient(srv Server, node Node, certs map[string]CertificateProvider, log *slog.Logger) (*Client, error) {
	if log == nil {
		log = slog.Default()
	}
	creds, err := channelCreds(srv)
	if err != nil {
		return nil, err
	}
	target := srv.URI
	if !strings.Contains(target, "://") {
		target = "passthrough:///" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponse)))
	if err != nil {
		return nil, fmt.Errorf("xds: server %s: %w", srv.URI, err)
	}
	c := &Client{srv: srv, node: nodeProto(node), log: log, conn: conn, types: map[string]*typeState{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	for _, t := range resourceTypes(certs) {
		c.types[t.url] = &typeState{url: t.url, decode: t.decode, allRequired: t.allRequired, watches: map[string]*watch{},
			subscribe: map[string]bool{}, unsubscribe: map[string]bool{}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(ctx)
	return c, nil
}

func channelCreds(srv Server) (credentials.TransportCredentials, error) {
	if srv.Creds != "tls" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := srv.TLS.CACertificateFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("xds: server %s: tls ca_certificate_file: %w", srv.URI, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("xds: server %s: tls ca_certificate_file %s holds no PEM certificate", srv.URI, f)
		}
		cfg.RootCAs = pool
	}
	if srv.TLS.CertificateFile != "" {
		cert, err := tls.LoadX509KeyPair(srv.TLS.CertificateFile, srv.TLS.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("xds: server %s: tls certificate: %w", srv.URI, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func nodeProto(n Node) *corev3.Node {
	p := &corev3.Node{Id: n.ID, Cluster: n.Cluster, UserAgentName: "weft",
		ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"}}
	if l := n.Locality; l != (Locality{}) {
		p.Locality = &corev3.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}
	}
	if len(n.Metadata) > 0 {
		if s, err := structpb.NewStruct(n.Metadata); err == nil {
			p.Metadata = s
		}
	}
	return p
}

// Watch asks for the resource name of type typeURL and calls fn with its
// value whenever a new one is taken (exists true), and with exists false
// when it is deleted or not found. A value already known is given at
// once. fn runs on the client's goroutine: it must not block. The
// returned function ends the watch.
func (c *Client) Watch(typeURL, name string, fn func(v any, exists bool)) (cancel func()) {
	c.mu.Lock()
	t := c.types[typeURL]
	w := t.watches[name]
	if w == nil {
		w = &watch{fns: map[int]func(any, bool){}}
		t.watches[name] = w
		t.send = true
		t.subscribe[name] = true
		delete(t.unsubscribe, name)
		c.kickLocked()
	}
	id := c.nextID
	c.nextID++
	w.fns[id] = fn
	v, has, missing := w.value, w.has, w.missing
	c.mu.Unlock()
	if has {
		fn(v, true)
	} else if missing {
		fn(nil, false)
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if w := t.watches[name]; w != nil {
			delete(w.fns, id)
			if len(w.fns) == 0 {
				if w.timer != nil {
					w.timer.Stop()
				}
				delete(t.watches, name)
				t.send = true
				t.unsubscribe[name] = true
				delete(t.subscribe, name)
				c.kickLocked()
			}
		}
	}
}

func (c *Client) kickLocked() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Stats returns the client's counts.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close ends the stream and the connection.
func (c *Client) Close() error {
	c.cancel()
	<-c.done
	c.mu.Lock()
	for _, t := range c.types {
		for _, w := range t.watches {
			if w.timer != nil {
				w.timer.Stop()
			}
		}
	}
	c.mu.Unlock()
	return c.conn.Close()
}

func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	failures := 0
	for ctx.Err() == nil {
		stream := c.stream
		if c.srv.Delta {
			stream = c.streamDelta
		}
		received, err := stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			// A stream that got a response was fine: the next one
			// starts without waiting (A57).
			failures = 0
		}
		d := backoff(failures)
		failures++
		c.log.Warn("weft: xds: stream to the management server ended; the last configuration stays in force", "server", c.srv.URI, "err", err, "retry_in", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func backoff(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	d := float64(backoffBase)
	for range failures - 1 {
		d *= 1.6
		if d > float64(backoffMax) {
			d = float64(backoffMax)
			break
		}
	}
	d *= 1 + 0.2*(2*rand.Float64()-1)
	return time.Duration(d)
}

// stream runs one ADS stream until it fails.
func (c *Client) stream(ctx context.Context) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(sctx)
	if err != nil {
		return false, err
	}
	c.begin(false)
	defer c.stopTimers()
	return pump(sctx, cancel, func(ctx context.Context) error { return c.sender(ctx, st) }, func() error {
		resp, err := st.Recv()
		if err == nil {
			c.handle(resp)
		}
		return err
	})
}

// begin readies every type for a new stream: the nonce does not survive
// it, the versions held do, and every name is asked again (in delta, all
// subscribed afresh).
func (c *Client) begin(delta bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Streams++
	c.streaming = true
	for _, t := range c.types {
		t.nonce, t.nack, t.answer = "", "", false
		if delta {
			clear(t.unsubscribe)
			clear(t.subscribe)
			for name := range t.watches {
				t.subscribe[name] = true
			}
		}
		t.send = len(t.watches) > 0
	}
	c.kickLocked()
}

// pump runs a stream's writer and its reader (read takes one response in)
// until either fails, and says whether any response came.
func pump(ctx context.Context, cancel func(), write func(context.Context) error, read func() error) (bool, error) {
	var received atomic.Bool
	sendErr := make(chan error, 1)
	go func() { sendErr <- write(ctx) }()
	recvErr := make(chan error, 1)
	go func() {
		for {
			if err := read(); err != nil {
				recvErr <- err
				return
			}
			received.Store(true)
		}
	}()
	var err error
	select {
	case err = <-recvErr:
	case err = <-sendErr:
	}
	cancel()
	return received.Load(), err
}

// sender writes the requests that are due, one stream's only writer.
func (c *Client) sender(ctx context.Context, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) error {
	first := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.kick:
		}
		for _, req := range c.due() {
			if first {
				req.Node = c.node
				first = false
			}
			if err := st.Send(req); err != nil {
				return err
			}
		}
	}
}

// due builds the requests of every type that has one due, and starts the
// not-found timers of the names they ask for the first time.
func (c *Client) due() []*discoveryv3.DiscoveryRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*discoveryv3.DiscoveryRequest
	for _, url := range typeOrder {
		t := c.types[url]
		if !t.send {
			continue
		}
		t.send = false
		req := &discoveryv3.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce}
		for name, w := range t.watches {
			req.ResourceNames = append(req.ResourceNames, name)
			if !w.has && !w.missing && w.timer == nil && c.streaming {
				c.startTimerLocked(t, name, w)
			}
		}
		if t.nack != "" {
			req.ErrorDetail = &statuspb.Status{Code: int32(code.Code_INVALID_ARGUMENT), Message: t.nack}
			t.nack = ""
		}
		t.answer = false
		out = append(out, req)
	}
	return out
}

func (c *Client) startTimerLocked(t *typeState, name string, w *watch) {
	w.timerSeq++
	seq := w.timerSeq
	w.timer = time.AfterFunc(NotFoundTimeout, func() {
		c.mu.Lock()
		if t.watches[name] != w || w.timerSeq != seq || w.has {
			c.mu.Unlock()
			return
		}
		w.timer, w.missing = nil, true
		fns := collect(w)
		c.mu.Unlock()
		c.log.Warn("weft: xds: resource not found: the management server did not send it", "type", t.url, "name", name, "after", NotFoundTimeout)
		for _, fn := range fns {
			fn(nil, false)
		}
	})
}

func collect(w *watch) []func(any, bool) {
	fns := make([]func(any, bool), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	return fns
}

type notice struct {
	fns    []func(any, bool)
	v      any
	exists bool
}

// handle takes a response in: decodes each resource, keeps the good ones,
// and ACKs or NACKs it.
func (c *Client) handle(resp *discoveryv3.DiscoveryResponse) {
	t := c.responseType(resp.GetTypeUrl())
	if t == nil {
		return
	}
	versions := map[string]string{}
	decoded, seen, errs := decodeAll(t, resp.GetResources(), nil)
	c.mu.Lock()
	notices := c.applyLocked(t, decoded, versions)
	if t.allRequired && !c.srv.IgnoreResourceDeletion && len(errs) == 0 {
		for name, w := range t.watches {
			if !seen[name] && w.has {
				notices = append(notices, c.removeLocked(w))
			}
		}
	}
	t.nonce = resp.GetNonce()
	if len(errs) == 0 {
		t.version = resp.GetVersionInfo()
	}
	nack := c.answerLocked(t, errs)
	c.mu.Unlock()
	c.after(t, resp.GetVersionInfo(), resp.GetNonce(), nack, notices)
}

// responseType is the state of a response's type, nil (logged) for one
// weft never asked for: grpc-go's choice, no ACK or NACK for it.
func (c *Client) responseType(url string) *typeState {
	c.mu.Lock()
	c.stats.Responses++
	t := c.types[url]
	c.mu.Unlock()
	if t == nil {
		c.log.Warn("weft: xds: resource type unknown in response from server; ignored", "type", url)
	}
	return t
}

// decodeAll decodes a response's resources (names gives each one's name
// when the response says it apart, as delta's does): the good ones by
// name, the names seen, and an error per bad one.
func decodeAll(t *typeState, resources []*anypb.Any, names []string) (decoded map[string]any, seen map[string]bool, errs []string) {
	decoded, seen = map[string]any{}, map[string]bool{}
	if n := len(resources); n > maxResources {
		return decoded, seen, []string{fmt.Sprintf("top level errors: %d resources in one response, over weft's %d", n, maxResources)}
	}
	for i, a := range resources {
		name, v, err := decodeAny(t, a)
		if name == "" && names != nil {
			name = names[i]
		}
		switch {
		case err != nil && name == "":
			errs = append(errs, "top level errors: "+err.Error())
		case seen[name]:
			errs = append(errs, fmt.Sprintf("resource %q: duplicate resource name in one response", name))
			delete(decoded, name)
		case err != nil:
			errs = append(errs, fmt.Sprintf("resource %q: %v", name, err))
			seen[name] = true
		default:
			seen[name] = true
			decoded[name] = v
		}
	}
	return decoded, seen, errs
}

// applyLocked takes the good resources in: each one asked for is kept as
// its resource's value (with its version, in delta), and its watchers
// told if it changed.
func (c *Client) applyLocked(t *typeState, decoded map[string]any, versions map[string]string) []notice {
	var notices []notice
	for name, v := range decoded {
		w := t.watches[name]
		if w == nil {
			continue // not asked for: ignored, as the protocol says
		}
		if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
		changed := !w.has || !equalResource(w.value, v)
		w.value, w.has, w.missing, w.version = v, true, false, versions[name]
		if changed {
			notices = append(notices, notice{collect(w), v, true})
		}
	}
	return notices
}

func (c *Client) removeLocked(w *watch) notice {
	w.value, w.has, w.missing, w.version = nil, false, true, ""
	return notice{collect(w), nil, false}
}

// answerLocked makes the ACK or NACK of a response due; it returns the
// NACK's text, "" for an ACK.
func (c *Client) answerLocked(t *typeState, errs []string) string {
	if len(errs) == 0 {
		c.stats.ACKs++
		t.nack = ""
	} else {
		t.nack = fmt.Sprintf("error parsing %q response: %s", shortType(t.url), strings.Join(errs, ";\n"))
		c.stats.NACKs++
		c.stats.LastNACK = t.nack
	}
	t.send, t.answer = true, true
	c.kickLocked()
	return t.nack
}

// after logs a NACK and tells the watchers, outside the lock.
func (c *Client) after(t *typeState, version, nonce, nack string, notices []notice) {
	if nack != "" {
		c.log.Warn("weft: xds: NACK: the management server sent a configuration weft cannot use; the last good one stays in force",
			"type", t.url, "version", version, "nonce", nonce, "reason", nack)
	}
	for _, n := range notices {
		for _, fn := range n.fns {
			fn(n.v, n.exists)
		}
	}
}

// decodeAny unwraps a SotW resource (possibly in a discovery Resource
// wrapper) and decodes it; a panic in decoding is an error, not a crash.
func decodeAny(t *typeState, a *anypb.Any) (name string, v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered from panic during resource parsing: %v", r)
		}
	}()
	if a.GetTypeUrl() == resourceWrapperType {
		var r discoveryv3.Resource
		if err := a.UnmarshalTo(&r); err != nil {
			return "", nil, fmt.Errorf("failed to unmarshal resource wrapper: %v", err)
		}
		a = r.GetResource()
	}
	if a.GetTypeUrl() != t.url {
		return "", nil, fmt.Errorf("resource of type %q in a response of type %q", a.GetTypeUrl(), t.url)
	}
	return t.decode(a)
}

const resourceWrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

func shortType(url string) string {
	return url[strings.LastIndexByte(url, '.')+1:]
}
