package netty

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Defaults, Dubbo's.
const (
	DefaultHeartbeat = 60 * time.Second
	DefaultReconnect = 2 * time.Second
	DefaultThreads   = 200
)

// ReadOnlyEvent is the Data of the event request a provider sends each
// consumer connection when it starts a graceful stop (Dubbo's READONLY_EVENT,
// "R", sent one-way): the consumer stops choosing that connection for new
// calls, while the calls it has sent are still answered.
const ReadOnlyEvent = "R"

// ErrServerBusy, wrapped in a Request's Broken, says the codec had no room
// to decode a sound body (its shared decode memory was in use): the server
// answers status 100, which consumers retry on another provider.
var ErrServerBusy = errors.New("server busy")

// Request is an exchange-level request: a call, a heartbeat (Event with no
// Data), or the READONLY event (Event with Data ReadOnlyEvent).
type Request struct {
	ID     uint64
	TwoWay bool
	Event  bool
	Data   any
	// Broken is set by a codec that could not decode the body: the server
	// answers BadRequest with its text, or, when it wraps ErrServerBusy,
	// status 100 (the body was fine, the server had no room for it).
	Broken error
}

// Response answers the Request of the same ID.
type Response struct {
	ID     uint64
	Status byte
	Event  bool
	Data   any
	// ErrMsg explains a status other than OK.
	ErrMsg string
}

type call struct {
	done  chan *Response
	conn  *Conn
	timer *time.Timer // reused across calls: no timer allocation per call
	req   Request     // what Send encodes (synchronously): no allocation per call
}

// release stops the call's timer and returns it to the pool; nothing of the
// call may be used afterwards.
func (cl *call) release() {
	cl.timer.Stop()
	cl.conn = nil
	cl.req = Request{}
	callPool.Put(cl)
}

var callPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan *Response, 1), timer: t}
}}

const shards = 32

// pendingTable holds the calls waiting for a response, sharded to keep lock
// contention low under many concurrent callers.
type pendingTable struct {
	shards [shards]struct {
		mu sync.Mutex
		m  map[uint64]*call
		_  [40]byte
	}
}

func newPendingTable() *pendingTable {
	p := &pendingTable{}
	for i := range p.shards {
		p.shards[i].m = map[uint64]*call{}
	}
	return p
}

func (p *pendingTable) put(id uint64, c *call) {
	s := &p.shards[id%shards]
	s.mu.Lock()
	s.m[id] = c
	s.mu.Unlock()
}

func (p *pendingTable) take(id uint64) *call {
	s := &p.shards[id%shards]
	s.mu.Lock()
	c := s.m[id]
	if c != nil {
		delete(s.m, id)
	}
	s.mu.Unlock()
	return c
}

// Len is the number of calls waiting.
func (p *pendingTable) Len() int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// failConn answers every call sent on conn with status.
func (p *pendingTable) failConn(conn *Conn, status byte, msg string) {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for id, c := range s.m {
			if c.conn == conn || conn == nil {
				delete(s.m, id)
				c.done <- &Response{ID: id, Status: status, ErrMsg: msg}
			}
		}
		s.mu.Unlock()
	}
}

// ClientOptions tune an ExchangeClient; zero values take Dubbo's defaults.
type ClientOptions struct {
	Heartbeat time.Duration // 0: DefaultHeartbeat; < 0: none
	Reconnect time.Duration // 0: DefaultReconnect
	// Framing, when set, stands between each connection and the client, as
	// ServerOptions.Framing does for a server: it gives the client the
	// Responses it makes of the connection's messages (Received).
	Framing func(c *ExchangeClient) extension.ChannelHandler
}

// ExchangeClient is a client connection with request/response correlation,
// deadlines, heartbeats and reconnection.
type ExchangeClient struct {
	url   *kernel.URL
	t     *Transporter
	codec extension.Codec
	log   *slog.Logger
	opt   ClientOptions

	handler  extension.ChannelHandler // the client, or its Framing
	conn     atomic.Pointer[Conn]
	lastErr  atomic.Pointer[error]
	pending  *pendingTable
	nextID   atomic.Uint64
	late     atomic.Int64
	closed   atomic.Bool
	draining atomic.Bool // CloseGracefully: unavailable, closing once idle
	done     chan struct{}
	wake     chan struct{}
	bg       sync.WaitGroup
	connects atomic.Int64
	lastLog  atomic.Int64 // unix nanos of the last dial failure logged
}

// dialLogInterval is how often a client logs that it cannot connect.
const dialLogInterval = 30 * time.Second

// Unavailable returns why the client takes no calls now (closed, or not
// connected and the last dial error), nil when it does.
func (c *ExchangeClient) Unavailable() error {
	if c.IsAvailable() {
		return nil
	}
	conn, err := c.channel()
	switch {
	case err != nil:
	case conn.readOnly.Load():
		err = kernel.Errorf(kernel.CodeNetwork, "provider %s is stopping (it sent READONLY); calls go to other providers", c.url.Address())
	default:
		err = kernel.Errorf(kernel.CodeNetwork, "client of %s is closing", c.url.Address())
	}
	return err
}

// NewExchangeClient connects to url's address. A failed first connection is
// not an error: the client keeps reconnecting and is unavailable meanwhile.
func NewExchangeClient(t *Transporter, url *kernel.URL, codec extension.Codec, opt ClientOptions) *ExchangeClient {
	if opt.Heartbeat == 0 {
		opt.Heartbeat = DefaultHeartbeat
	}
	if opt.Reconnect <= 0 {
		opt.Reconnect = DefaultReconnect
	}
	c := &ExchangeClient{url: url, t: t, codec: codec, log: t.log, opt: opt, pending: newPendingTable(),
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	c.handler = c
	if opt.Framing != nil {
		c.handler = opt.Framing(c)
	}
	c.connect()
	c.bg.Add(1)
	go c.keepalive()
	return c
}

func (c *ExchangeClient) connect() bool {
	conn, err := c.t.dial(c.url, c.codec, c.handler)
	if err != nil {
		c.lastErr.Store(&err)
		// Once per address per interval: a provider that stays down
		// must not flood the log with a line per reconnect.
		if now := time.Now().UnixNano(); now-c.lastLog.Load() >= int64(dialLogInterval) {
			c.lastLog.Store(now)
			c.log.Warn("weft: cannot connect to provider", "addr", c.url.Address(), "err", err, "retry_every", c.opt.Reconnect)
		}
		return false
	}
	if c.closed.Load() {
		conn.Close()
		return false
	}
	c.connects.Add(1)
	c.conn.Store(conn)
	return true
}

// keepalive sends heartbeats, closes a connection silent for three
// heartbeats, and reconnects a lost one every Reconnect interval.
func (c *ExchangeClient) keepalive() {
	defer c.bg.Done()
	tick := c.opt.Reconnect
	if c.opt.Heartbeat > 0 && c.opt.Heartbeat/3 < tick {
		tick = c.opt.Heartbeat / 3
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastTry := time.Now()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-t.C:
		}
		now := time.Now()
		conn := c.conn.Load()
		if conn == nil || conn.IsClosed() {
			if now.Sub(lastTry) >= c.opt.Reconnect {
				lastTry = now
				if c.connect() {
					c.log.Info("weft: reconnected", "addr", c.url.Address())
				}
			}
			continue
		}
		if c.opt.Heartbeat <= 0 {
			continue
		}
		read := time.Unix(0, conn.lastRead.Load())
		if now.Sub(read) > 3*c.opt.Heartbeat {
			c.log.Warn("weft: closing idle connection", "addr", c.url.Address(), "silent_for", now.Sub(read).Round(time.Millisecond))
			conn.Close()
			continue
		}
		if now.Sub(read) >= c.opt.Heartbeat || now.Sub(time.Unix(0, conn.lastWrite.Load())) >= c.opt.Heartbeat {
			conn.Send(&Request{ID: c.nextID.Add(1), TwoWay: true, Event: true})
		}
	}
}

// URL is the provider URL the client connects to.
func (c *ExchangeClient) URL() *kernel.URL { return c.url }

// IsAvailable reports whether the connection is up and takes new calls: not
// closed, not draining, and its provider has not said it is stopping (the
// READONLY event).
func (c *ExchangeClient) IsAvailable() bool {
	conn := c.conn.Load()
	return !c.closed.Load() && !c.draining.Load() && conn != nil && !conn.IsClosed() && !conn.readOnly.Load()
}

// Pending is the number of calls waiting for a response.
func (c *ExchangeClient) Pending() int { return c.pending.Len() }

// LateResponses counts responses that came after their call gave up.
func (c *ExchangeClient) LateResponses() int64 { return c.late.Load() }

// Connects counts successful connections, the first included.
func (c *ExchangeClient) Connects() int64 { return c.connects.Load() }

func (c *ExchangeClient) channel() (*Conn, error) {
	conn := c.conn.Load()
	if c.closed.Load() {
		return nil, kernel.Errorf(kernel.CodeNetwork, "client of %s is closed", c.url.Address())
	}
	if conn == nil || conn.IsClosed() {
		msg := "not connected to " + c.url.Address() + "; reconnecting"
		// The connection's own cause first: Disconnected, which records it
		// as lastErr, runs only once both loops have stopped, and a call in
		// between (a TLS server's "certificate required" alert just after
		// the handshake, on a busy machine) would hear no reason at all.
		var cause error
		if conn != nil {
			cause = conn.Err()
		}
		if e := c.lastErr.Load(); cause == nil && e != nil {
			cause = *e
		}
		if cause != nil {
			return nil, kernel.Wrap(kernel.CodeNetwork, cause, "%s", msg)
		}
		return nil, kernel.Errorf(kernel.CodeNetwork, "%s", msg)
	}
	return conn, nil
}

// Oneway sends data without waiting for an answer.
func (c *ExchangeClient) Oneway(data any) error {
	conn, err := c.channel()
	if err != nil {
		return err
	}
	if err := conn.Send(&Request{ID: c.nextID.Add(1), Data: data}); err != nil {
		return kernel.Wrap(kernel.CodeNetwork, err, "send to %s", c.url.Address())
	}
	return nil
}

// Request sends data and waits for its response until ctx is done or timeout
// has passed, whichever comes first. A call that gives up leaves nothing in
// the pending table; its response, if it comes, is dropped and counted.
func (c *ExchangeClient) Request(ctx context.Context, data any, timeout time.Duration) (*Response, error) {
	conn, err := c.channel()
	if err != nil {
		return nil, err
	}
	id := c.nextID.Add(1)
	cl := callPool.Get().(*call)
	cl.conn = conn
	c.pending.put(id, cl)
	// In flight from here to return: the connection batches its writes
	// while other calls are about to send too.
	conn.coming.Add(1)
	defer conn.coming.Add(-1)
	cl.req = Request{ID: id, TwoWay: true, Data: data}
	if err := conn.Send(&cl.req); err != nil {
		if c.pending.take(id) == nil {
			<-cl.done
		}
		cl.release()
		if ke, ok := err.(*kernel.Error); ok {
			return nil, ke
		}
		if cause := conn.Err(); err == ErrClosed && cause != nil {
			// Closed between choosing the connection and sending: say why
			// (a TLS server refusing this client's certificate closes right
			// after the handshake, with an alert).
			return nil, kernel.Wrap(kernel.CodeNetwork, err, "send to %s (%s)", c.url.Address(), cutText(cause.Error()))
		}
		return nil, kernel.Wrap(kernel.CodeNetwork, err, "send to %s", c.url.Address())
	}
	start := time.Now()
	var expired <-chan time.Time
	if dl, ok := ctx.Deadline(); timeout > 0 && (!ok || time.Until(dl) > timeout) {
		// Since Go 1.23, Reset and Stop leave no stale tick in the channel.
		cl.timer.Reset(timeout)
		expired = cl.timer.C
	}
	select {
	case resp := <-cl.done:
		cl.release()
		return resp, nil
	case <-ctx.Done():
	case <-expired:
	}
	if c.pending.take(id) == nil {
		// The response is being delivered right now: take it, it is ours.
		resp := <-cl.done
		cl.release()
		return resp, nil
	}
	cl.release()
	elapsed := time.Since(start).Round(time.Millisecond)
	if ctx.Err() == context.Canceled {
		return nil, kernel.Wrap(kernel.CodeNetwork, ctx.Err(), "call to %s canceled after %v", c.url.Address(), elapsed)
	}
	return nil, &kernel.Error{Code: kernel.CodeTimeout, Cause: context.DeadlineExceeded,
		Msg: fmt.Sprintf("no response from %s within %v (request id %d, client-side timeout, channel %s -> %s)",
			c.url.Address(), elapsed, id, conn.LocalAddr(), conn.RemoteAddr())}
}

// CloseGracefully reports the client unavailable at once (so that nothing
// chooses it any more), waits for the calls in flight to end (each is
// bounded by its own deadline) up to max, then closes. It is what a consumer
// does with the connection of a provider that left the registry while it
// drains: the calls already sent still get their answers, as in Dubbo's
// HeaderExchangeClient.close(timeout), and a call that chose the client
// just before is still sent rather than failed unsent.
func (c *ExchangeClient) CloseGracefully(max time.Duration) {
	if c.draining.Swap(true) || c.closed.Load() {
		return
	}
	deadline := time.Now().Add(max)
	for c.pending.Len() > 0 && time.Now().Before(deadline) {
		select {
		case <-c.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	c.Close()
}

// Close closes the connection and fails the pending calls.
func (c *ExchangeClient) Close() {
	if c.closed.Swap(true) {
		return
	}
	close(c.done)
	c.bg.Wait()
	if conn := c.conn.Load(); conn != nil {
		conn.Close()
		conn.loops.Wait()
	}
	c.pending.failConn(nil, kernel.ResponseChannelInactive, "client of "+c.url.Address()+" closed")
}

// Connected is part of extension.ChannelHandler.
func (c *ExchangeClient) Connected(extension.Channel) {}

// Disconnected fails every call sent on the channel at once.
func (c *ExchangeClient) Disconnected(ch extension.Channel) {
	msg := "connection to " + c.url.Address() + " closed"
	if err := ch.(*Conn).Err(); err != nil {
		// Say why, to the calls in flight and to those that find the
		// client not connected: a TLS server refusing this client's
		// certificate, say, closes right after the handshake with an alert.
		msg += ": " + cutText(err.Error())
		c.lastErr.Store(&err)
	}
	c.pending.failConn(ch.(*Conn), kernel.ResponseChannelInactive, msg)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Received completes calls, answers the server's heartbeats and marks the
// connection read-only on the server's READONLY event.
func (c *ExchangeClient) Received(ch extension.Channel, msg any) {
	switch m := msg.(type) {
	case *Response:
		if m.Event {
			return
		}
		if cl := c.pending.take(m.ID); cl != nil {
			cl.done <- m
		} else {
			c.late.Add(1)
		}
	case *Request:
		if m.Event && m.Data == ReadOnlyEvent {
			if conn, ok := ch.(*Conn); ok && !conn.readOnly.Swap(true) {
				c.log.Info("weft: provider is stopping (READONLY): no new calls to it", "addr", c.url.Address())
			}
		}
		if m.Event && m.TwoWay {
			if conn, ok := ch.(*Conn); ok {
				conn.SendControl(&Response{ID: m.ID, Status: kernel.ResponseOK, Event: true})
			}
		}
	}
}

// Caught logs a channel error.
func (c *ExchangeClient) Caught(ch extension.Channel, err error) {
	c.log.Warn("weft: client channel error", "addr", c.url.Address(), "err", err)
}

// RequestHandler serves the requests of an ExchangeServer, on a goroutine of
// the bounded pool. It answers two-way requests with reply.
type RequestHandler interface {
	Reply(ch *Conn, req *Request) *Response
}

// KeyThreadPool is Dubbo's `threadpool`: the name of a server's pool.
const KeyThreadPool = "threadpool"

// PoolFor is the pool of a server exported on u: its `threadpool` (the
// default, fixed, when unset) found with pools and read from u. Without
// pools (a protocol used on its own), the fixed pool of `threads`; a
// `threadpool` named then is an error.
func PoolFor(pools func(name string) (extension.ThreadPool, error), u *kernel.URL) (extension.PoolSpec, error) {
	name := u.Param(KeyThreadPool)
	if pools == nil {
		if name != "" {
			return extension.PoolSpec{}, fmt.Errorf("threadpool %q: this protocol was built with its fixed pool only", name)
		}
		return extension.PoolSpec{}, nil
	}
	if name == "" {
		name = extension.DefaultThreadPool
	}
	tp, err := pools(name)
	if err != nil {
		return extension.PoolSpec{}, err
	}
	return tp.Pool(u)
}

// ServerOptions tune an ExchangeServer.
type ServerOptions struct {
	Heartbeat time.Duration // idle close at 3x; 0: DefaultHeartbeat; < 0: never
	Threads   int           // concurrent requests; 0: DefaultThreads
	// Pool is the threadpool (Dubbo's `threadpool`): its Threads, when
	// set, is the bound instead of Threads; zero is a fixed pool of
	// Threads without a queue.
	Pool extension.PoolSpec
	// Framing, when set, stands between the transport and the exchange
	// server: it receives each connection's messages and hands the server
	// the Requests it makes of them (Dispatch), as a protocol whose
	// connections carry state of their own does (HTTP/2 for Triple).
	Framing func(es *ExchangeServer) extension.ChannelHandler
}

// GoingAway is a Framing handler told, when its server starts to close,
// of each connection, before the calls in flight are waited for: an HTTP/2
// server says GOAWAY then, so that its clients send their next calls
// elsewhere while these finish.
type GoingAway interface {
	GoingAway(c *Conn)
}

// UnservedHandler is a RequestHandler told of each two-way request the
// server answered itself (resp, already sent), without calling Reply
// (every thread busy, shutting down), so that it can release what it holds
// for the request, or answer it itself when resp means nothing on its wire.
type UnservedHandler interface {
	Unserved(ch *Conn, req *Request, resp *Response)
}

// ExchangeServer serves requests: heartbeats on the read loop, calls on a
// bounded set of goroutines (Dubbo's "all" dispatcher on a fixed pool of
// `threads`); when all are busy it answers status 100 at once.
type ExchangeServer struct {
	srv      *Server
	handler  RequestHandler
	unserved UnservedHandler // nil unless handler is one
	log      *slog.Logger
	opt      ServerOptions
	busy     atomic.Int64
	// rejected counts calls answered with status 100 (pool full), for the
	// metrics' dubbo_thread_pool_reject_thread_count.
	rejected atomic.Int64
	eventID  atomic.Uint64 // ids of the READONLY events it sends
	pool     *workerPool
	// waitq holds the calls waiting for a thread (the pool's queues);
	// queued counts them. runAt is how many may run before a call
	// queues instead (Core, or Threads for an eager pool).
	waitq  chan task
	queued atomic.Int64
	runAt  int64
	done   chan struct{}
	bg     sync.WaitGroup

	// closeMu orders wg.Add in Received before wg.Wait in Close.
	closeMu sync.RWMutex
	closing bool
	wg      sync.WaitGroup
}

// Bind starts an exchange server on url's address.
func Bind(t *Transporter, url *kernel.URL, codec extension.Codec, h RequestHandler, opt ServerOptions) (*ExchangeServer, error) {
	if opt.Heartbeat == 0 {
		opt.Heartbeat = DefaultHeartbeat
	}
	if opt.Pool.Threads > 0 {
		opt.Threads = opt.Pool.Threads
	}
	if opt.Threads <= 0 {
		opt.Threads = DefaultThreads
	}
	if opt.Pool.Threads <= 0 {
		opt.Pool = extension.PoolSpec{Threads: opt.Threads, Core: opt.Threads, Alive: time.Minute}
	}
	es := &ExchangeServer{handler: h, log: t.log, opt: opt, done: make(chan struct{})}
	es.runAt = int64(opt.Threads)
	if q := opt.Pool.Queues; q > 0 {
		es.waitq = make(chan task, q)
		if !opt.Pool.Eager {
			// Java's ThreadPoolExecutor: past its core threads a call
			// queues, and a thread beyond core starts only when the
			// queue is full.
			es.runAt = int64(max(opt.Pool.Core, 1))
		}
	}
	es.pool = newWorkerPool(opt.Threads, opt.Pool.Core, opt.Pool.Alive, es.serve)
	var ch extension.ChannelHandler = es
	if opt.Framing != nil {
		ch = opt.Framing(es)
	}
	es.unserved, _ = h.(UnservedHandler)
	srv, err := t.Bind(url, codec, ch)
	if err != nil {
		return nil, err
	}
	es.srv = srv
	if opt.Heartbeat > 0 {
		es.bg.Add(1)
		go es.idleCheck()
	}
	return es, nil
}

// Addr is the bound address.
func (s *ExchangeServer) Addr() string { return s.srv.Addr().String() }

// Busy is the number of requests being served.
func (s *ExchangeServer) Busy() int64 { return s.busy.Load() }

// ServerStats is a snapshot of a server's pool and connections, read by
// the metrics at scrape time (nothing is counted for it on the call path
// but the rejections).
type ServerStats struct {
	Addr string
	// Threads is the pool's bound (`threads`); Workers the goroutines it
	// has now, Largest the most it ever had, Busy those serving a call.
	Threads, Workers, Largest, Busy int64
	// Queued are the calls waiting in the pool's queue (`queues`).
	Queued int64
	// Rejected counts calls refused with status 100 because every worker
	// was busy.
	Rejected int64
	// Connections is the number of open client connections.
	Connections int
}

// StatsReporter is a protocol whose servers and clients are this
// package's: the metrics read their pools and connections through it.
type StatsReporter interface {
	ServerStats() []ServerStats
	ClientConnections() int64
}

// Stats returns the server's counts now.
func (s *ExchangeServer) Stats() ServerStats {
	return ServerStats{Addr: s.Addr(), Threads: s.pool.max, Workers: s.pool.workers.Load(), Largest: s.pool.largest.Load(),
		Busy: s.busy.Load(), Queued: s.queued.Load(), Rejected: s.rejected.Load(), Connections: s.srv.NumChannels()}
}

func (s *ExchangeServer) idleCheck() {
	defer s.bg.Done()
	t := time.NewTicker(s.opt.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			for _, c := range s.srv.Channels() {
				if now.Sub(time.Unix(0, c.lastRead.Load())) > 3*s.opt.Heartbeat {
					s.log.Info("weft: closing idle connection", "remote", c.RemoteAddr().String())
					c.Close()
				}
			}
		}
	}
}

// Connected is part of extension.ChannelHandler.
func (s *ExchangeServer) Connected(extension.Channel) {}

// Disconnected is part of extension.ChannelHandler.
func (s *ExchangeServer) Disconnected(extension.Channel) {}

// Caught logs.
func (s *ExchangeServer) Caught(ch extension.Channel, err error) {
	s.log.Warn("weft: server channel error", "remote", ch.RemoteAddr().String(), "err", err)
}

// Received answers heartbeats and broken requests on the read loop and hands
// calls to the pool.
func (s *ExchangeServer) Received(ch extension.Channel, msg any) {
	s.dispatch(ch.(*Conn), msg, false)
}

// Inline serves a call on the read loop (Inliner) when a thread is free for
// it; heartbeats and broken requests are answered there anyway.
func (s *ExchangeServer) Inline(c *Conn, msg any) bool {
	return s.dispatch(c, msg, true)
}

// Dispatch serves req as Received does, for a Framing handler: on the
// calling goroutine when inline is set and a thread is free (it reports
// false when none is, and the caller dispatches again without inline), or
// on the pool.
func (s *ExchangeServer) Dispatch(c *Conn, req *Request, inline bool) bool {
	return s.dispatch(c, req, inline)
}

// dispatch answers heartbeats and broken requests at once and serves a call
// on the calling goroutine (inline) or on the pool. It reports whether it
// handled msg; only an inline offer can be declined (the pool is full: the
// ordinary path then answers status 100).
func (s *ExchangeServer) dispatch(conn *Conn, msg any, inline bool) bool {
	req, ok := msg.(*Request)
	if !ok {
		return true // heartbeat responses: reading them kept the channel alive
	}
	switch {
	case req.Event:
		if req.TwoWay {
			// A peer sending heartbeats and never reading the replies is
			// closed by SendControl; other errors mean it closed already.
			conn.SendControl(&Response{ID: req.ID, Status: kernel.ResponseOK, Event: true})
		}
		return true
	case req.Broken != nil:
		if req.TwoWay {
			status := kernel.ResponseBadRequest
			if errors.Is(req.Broken, ErrServerBusy) {
				status = kernel.ResponseServerThreadpoolExhausted
			}
			reply(conn, &Response{ID: req.ID, Status: status, ErrMsg: req.Broken.Error()})
		}
		return true
	}
	s.closeMu.RLock()
	if s.closing {
		s.closeMu.RUnlock()
		if req.TwoWay {
			resp := &Response{ID: req.ID, Status: kernel.ResponseServerError,
				ErrMsg: fmt.Sprintf("server %s is shutting down; retry on another provider", s.Addr())}
			reply(conn, resp)
			s.unservedReq(conn, req, resp)
		}
		return true
	}
	// `threads` bounds the calls being served, inline or on the pool: a
	// thread is reserved here and freed when serve ends. Past the pool's
	// core a call waits in its queue, if it has one with room.
	if !s.reserve(s.runAt) {
		if inline {
			s.closeMu.RUnlock()
			return false
		}
		if s.enqueue(conn, req) {
			s.closeMu.RUnlock()
			return true
		}
		if s.runAt == int64(s.opt.Threads) || !s.reserve(int64(s.opt.Threads)) {
			s.closeMu.RUnlock()
			s.refuse(conn, req, fmt.Sprintf("server %s is busy: all %d threads serve other calls%s; retry on another provider or raise threads", s.Addr(), s.opt.Threads, s.queueText()))
			return true
		}
	}
	if n := conn.serving.Add(1); n > int32(s.connShare()) {
		// One connection never holds the last eighth of the threads: the
		// other connections' calls are served while one floods.
		conn.serving.Add(-1)
		s.busy.Add(-1)
		s.closeMu.RUnlock()
		s.refuse(conn, req, fmt.Sprintf("server %s is busy: this connection holds %d of its %d threads, the most one connection may; retry on another provider or raise threads", s.Addr(), n-1, s.opt.Threads))
		return true
	}
	s.wg.Add(1)
	s.closeMu.RUnlock()
	if req.TwoWay {
		conn.coming.Add(1) // its answer is coming: see serve
	}
	if inline {
		s.serve(task{conn, req})
		return true
	}
	if !s.pool.submit(task{conn, req}) {
		// A thread is reserved, so a worker is at most finishing its last
		// call (its thread freed, itself not yet back for the next): the
		// call gets a goroutine of its own rather than waiting for it.
		go s.serve(task{conn, req})
	}
	return true
}

// refuse answers req with status 100 (SERVER_THREADPOOL_EXHAUSTED_ERROR),
// which a consumer's cluster retries on another provider.
func (s *ExchangeServer) refuse(conn *Conn, req *Request, msg string) {
	s.rejected.Add(1)
	if req.TwoWay {
		resp := &Response{ID: req.ID, Status: kernel.ResponseServerThreadpoolExhausted, ErrMsg: msg}
		reply(conn, resp)
		s.unservedReq(conn, req, resp)
	}
}

// connShare is the most threads one connection's calls may hold: all but
// an eighth, which stays for the others (all of them when threads < 8).
func (s *ExchangeServer) connShare() int {
	return s.opt.Threads - s.opt.Threads/8
}

func (s *ExchangeServer) unservedReq(c *Conn, req *Request, resp *Response) {
	if s.unserved != nil {
		s.unserved.Unserved(c, req, resp)
	}
}

// reserve takes a thread while fewer than limit serve calls.
func (s *ExchangeServer) reserve(limit int64) bool {
	for {
		n := s.busy.Load()
		if n >= limit {
			return false
		}
		if s.busy.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// enqueue puts req in the pool's queue, if it has one with room: it runs
// when a thread frees (drain). Called under closeMu's read lock.
func (s *ExchangeServer) enqueue(conn *Conn, req *Request) bool {
	if s.waitq == nil {
		return false
	}
	for {
		n := s.queued.Load()
		if n >= int64(cap(s.waitq)) {
			return false
		}
		if s.queued.CompareAndSwap(n, n+1) {
			break
		}
	}
	s.wg.Add(1)
	if req.TwoWay {
		conn.coming.Add(1)
	}
	s.waitq <- task{conn, req} // room: counted by queued
	// A thread may have freed since reserve failed, with nothing queued
	// to take it then.
	s.drain(s.runAt)
	return true
}

// drain runs queued calls while fewer than limit run.
func (s *ExchangeServer) drain(limit int64) {
	for s.queued.Load() > 0 && s.reserve(limit) {
		select {
		case t := <-s.waitq:
			s.queued.Add(-1)
			t.conn.serving.Add(1)
			if !s.pool.submit(t) {
				go s.serve(t)
			}
		default:
			s.busy.Add(-1)
			return
		}
	}
}

// handOff gives the thread of a call that ended to the call that has
// waited longest in the queue, as a pool's worker takes the next queued
// task; false (the thread is to be freed) when none waits.
func (s *ExchangeServer) handOff() bool {
	if s.waitq == nil || s.queued.Load() == 0 {
		return false
	}
	select {
	case t := <-s.waitq:
		s.queued.Add(-1)
		t.conn.serving.Add(1)
		if !s.pool.submit(t) {
			go s.serve(t)
		}
		return true
	default:
		return false
	}
}

func (s *ExchangeServer) queueText() string {
	if s.waitq == nil {
		return ""
	}
	return fmt.Sprintf(" and all %d places of its queue are taken", cap(s.waitq))
}

// MaxErrorText bounds the text of an error response, sent or received: an
// error may quote hostile input, and an answer that does not fit in a frame
// is no answer at all.
const MaxErrorText = 4 << 10

// cutText cuts s to MaxErrorText bytes at a rune boundary, saying so.
func cutText(s string) string { return view.Cut(s, MaxErrorText) }

// SentData is a Response's Data that is told, once Send has returned,
// that its bytes are written or copied for writing (or never will be): a
// protocol that builds its answers in pooled buffers takes them back then.
type SentData interface {
	Sent()
}

// reply sends resp, so that the caller always gets an answer: an error text
// is cut to fit, and a result that cannot be encoded (too large, a type the
// serialization does not know) is answered with an error saying so.
func reply(conn *Conn, resp *Response) {
	if resp.Status != kernel.ResponseOK {
		resp.ErrMsg = cutText(resp.ErrMsg)
	}
	err := conn.Send(resp)
	if s, ok := resp.Data.(SentData); ok {
		s.Sent()
	}
	if err == nil || err == ErrClosed {
		return
	}
	status := kernel.ResponseBadResponse
	if resp.Status != kernel.ResponseOK {
		status = resp.Status
	}
	if err := conn.Send(&Response{ID: resp.ID, Status: status, ErrMsg: cutText(err.Error())}); err != nil && err != ErrClosed {
		conn.log.Warn("weft: cannot answer a request", "remote", conn.RemoteAddrString(), "id", resp.ID, "err", err)
	}
}

// serve runs on a pool worker.
func (s *ExchangeServer) serve(t task) {
	defer s.wg.Done()
	conn, req := t.conn, t.req
	resp := s.reply(conn, req)
	// The call is done: its thread (reserved by dispatch) is free before
	// the answer goes out, so that a caller sending its next call as soon
	// as it has this answer does not find the thread still taken and get
	// status 100 from a pool with room.
	conn.serving.Add(-1)
	if !s.handOff() {
		s.busy.Add(-1)
	}
	if req.TwoWay {
		// No longer coming: when nothing else is, the answer is written
		// at once by this goroutine rather than batched.
		conn.coming.Add(-1)
	}
	if req.TwoWay && resp != nil {
		resp.ID = req.ID
		reply(conn, resp)
	}
}

// reply runs the handler; a panic in it (a filter's or the framework's: the
// service's own are business errors already) fails this call, logged with
// its stack, and never the process, which serves every other caller.
func (s *ExchangeServer) reply(conn *Conn, req *Request) (resp *Response) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("weft: panic while serving a request", "remote", conn.RemoteAddrString(), "id", req.ID,
				"panic", view.Text(p), "stack", string(debug.Stack()))
			resp = &Response{Status: kernel.ResponseServiceError,
				ErrMsg: cutText("weft: unknown: server " + s.Addr() + " failed serving the call: " + view.Text(p))}
		}
	}()
	return s.handler.Reply(conn, req)
}

// GoingAway sends the connection Dubbo's READONLY event, the first step of
// a graceful stop: its consumer chooses other providers for new calls, and
// the calls it sent are still served. (A Framing handler has its own:
// Triple's GOAWAY.) It does not wait for room (SendNoWait): Close tells
// every connection in turn, and one whose peer does not read would hold
// up the others.
func (s *ExchangeServer) GoingAway(c *Conn) {
	c.SendNoWait(&Request{ID: s.eventID.Add(1), Event: true, Data: ReadOnlyEvent})
}

// Close stops accepting, tells every connection it is going away (READONLY
// or the framing's own), waits up to wait for calls in flight, then closes
// every connection.
func (s *ExchangeServer) Close(wait time.Duration) error {
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	s.bg.Wait()
	s.closeMu.Lock()
	s.closing = true
	s.closeMu.Unlock()
	if ga, ok := s.srv.handler.(GoingAway); ok {
		for _, c := range s.srv.Channels() {
			ga.GoingAway(c)
		}
	}
	finished := make(chan struct{})
	go func() { s.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(wait):
		s.log.Warn("weft: closing with calls still running", "addr", s.Addr(), "busy", s.busy.Load())
	}
	for _, c := range s.srv.Channels() {
		c.CloseGracefully(100 * time.Millisecond)
	}
	err := s.srv.Close()
	s.pool.close()
	return err
}
