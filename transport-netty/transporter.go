package netty

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the transporter's extension name.
const Name = "netty"

// Transporter opens TCP servers and client connections, over TLS when it
// has TLS material.
type Transporter struct {
	log  *slog.Logger
	tls  *TLS
	alpn []string // the TLS application protocols it offers (h2 for Triple)
	// security finds the ClientSecurity a provider's URL names
	// (extension.KeySecurity), which offers secureALPN; nil: none.
	security   func(name string) (extension.ClientSecurity, error)
	secureALPN []string
	// clientConns counts the open connections this transporter dialled,
	// for metrics.
	clientConns atomic.Int64
}

// ClientConnections is the number of open connections this transporter
// dialled.
func (t *Transporter) ClientConnections() int64 { return t.clientConns.Load() }

// NewTransporter returns a transporter logging to log.
func NewTransporter(log *slog.Logger) *Transporter { return &Transporter{log: log} }

// NewTLSTransporter returns a transporter whose servers and clients speak
// TLS with t's material.
func NewTLSTransporter(log *slog.Logger, t *TLS) *Transporter { return &Transporter{log: log, tls: t} }

// NewTLSTransporterALPN is NewTLSTransporter offering the application
// protocols alpn in its handshakes (HTTP/2 over TLS needs "h2": gRPC
// clients refuse a server that does not select it).
func NewTLSTransporterALPN(log *slog.Logger, t *TLS, alpn ...string) *Transporter {
	return &Transporter{log: log, tls: t, alpn: alpn}
}

// SetSecurity makes the transporter dial a provider whose URL names a
// ClientSecurity (extension.KeySecurity) with the TLS that one gives,
// offering the application protocols alpn; find looks it up by name.
// It is set once, before the first dial.
func (t *Transporter) SetSecurity(find func(name string) (extension.ClientSecurity, error), alpn ...string) {
	t.security, t.secureALPN = find, alpn
}

// clientTLS is the TLS configuration of a dial to url: its ClientSecurity's
// when it names one, else the transporter's own; nil: plain TCP.
func (t *Transporter) clientTLS(url *kernel.URL) (*tls.Config, error) {
	name := url.Param(extension.KeySecurity)
	if name == "" {
		if t.tls == nil {
			return nil, nil
		}
		return t.tls.client(url.Host, t.alpn), nil
	}
	if t.security == nil {
		return nil, kernel.Errorf(kernel.CodeNetwork, "provider %s asks for security %q, and this protocol has no security extensions", url.Address(), name)
	}
	sec, err := t.security(name)
	if err != nil {
		return nil, kernel.Wrap(kernel.CodeNetwork, err, "provider %s asks for security %q", url.Address(), name)
	}
	cfg, err := sec.ClientTLS(url)
	if err != nil {
		return nil, kernel.Wrap(kernel.CodeNetwork, err, "security %q cannot secure a connection to %s", name, url.Address())
	}
	if cfg != nil && len(cfg.NextProtos) == 0 && len(t.secureALPN) > 0 {
		cfg = cfg.Clone()
		cfg.NextProtos = t.secureALPN
	}
	return cfg, nil
}

// Bind listens on the URL's host:port and serves every connection with codec
// and handler.
func (t *Transporter) Bind(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (*Server, error) {
	addr := net.JoinHostPort(url.Host, strconv.Itoa(url.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("weft: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, codec: codec, handler: handler, log: t.log, conns: map[*Conn]struct{}{}, done: make(chan struct{}),
		accepts: int(url.ParamInt(KeyAccepts, 0)), big: newBigBudget(maxBigRead)}
	if t.tls != nil {
		s.tls = t.tls.server(t.alpn)
	}
	if name := url.Param(extension.KeySecurity); name != "" {
		if err := s.secureBy(t, name, url); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.wg.Add(2)
	go s.accept()
	go s.watch()
	return s, nil
}

// Connect dials the URL's address; `connect.timeout` (ms, default 3000)
// bounds the dial.
func (t *Transporter) Connect(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (extension.Channel, error) {
	return t.dial(url, codec, handler)
}

func (t *Transporter) dial(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (*Conn, error) {
	timeout := time.Duration(url.ParamInt("connect.timeout", 3000)) * time.Millisecond
	cfg, err := t.clientTLS(url)
	if err != nil {
		return nil, err
	}
	nc, err := net.DialTimeout("tcp", url.Address(), timeout)
	if err != nil {
		return nil, kernel.Wrap(kernel.CodeNetwork, err, "connect to %s", url.Address())
	}
	if cfg != nil {
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		tc := tls.Client(nc, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			nc.Close()
			if sec := url.Param(extension.KeySecurity); sec != "" {
				// The security's own checks say what failed; weft's tls
				// block's hints would mislead.
				return nil, kernel.Wrap(kernel.CodeNetwork, err, "TLS handshake (security %s) with %s failed", sec, url.Address())
			}
			return nil, kernel.Wrap(kernel.CodeNetwork, err, "TLS handshake with %s failed (%s)", url.Address(), explainTLS(err))
		}
		nc = tc
	}
	c := newConn(nc, codec, handler, t.log)
	c.comingOver = 1 // a client's own call is one of those in flight
	c.start()
	// Counted down when the connection closes, whoever closes it; one
	// goroutine per connection, which already has two.
	t.clientConns.Add(1)
	go func() { <-c.Done(); t.clientConns.Add(-1) }()
	return c, nil
}

// Server is a listening endpoint and its connections.
type Server struct {
	ln      net.Listener
	codec   extension.Codec
	handler extension.ChannelHandler
	log     *slog.Logger

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup

	tls *tls.Config // nil: plain TCP
	// security, when the server's URL names one, decides per connection
	// (a mesh's inbound listener), over tls; url is the server's.
	security   extension.ServerSecurity
	url        *kernel.URL
	secureALPN []string
	// handshakeLog limits handshake-failure warnings to one per interval;
	// refusedLog the warnings of connections refused past accepts.
	handshakeLog, refusedLog atomic.Int64
	// accepts is Dubbo's `accepts`: the most connections served at once,
	// 0 for no bound.
	accepts int
	// handshaking counts TLS handshakes under way, which count against
	// accepts too.
	handshaking atomic.Int64
	// big bounds the read buffers its connections grow for large frames.
	big *bigBudget
}

// KeyAccepts is Dubbo's protocol key for the most connections a server
// serves at once (default 0: no bound). A connection past it is closed
// as soon as it is accepted, as Java's AbstractServer.connected does, and
// logged at most once a second.
const KeyAccepts = "accepts"

// watchInterval is how often a server checks its connections' frames in
// progress (Conn.stale); a variable for tests.
var watchInterval = time.Second

// watch closes connections that started a frame and did not finish it in
// time (a peer trickling bytes: slowloris). The idle rule (3 heartbeats
// without a message) is the exchange server's.
func (s *Server) watch() {
	defer s.wg.Done()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			for _, c := range s.Channels() {
				if why := c.stale(now.UnixNano()); why != "" {
					s.log.Warn("weft: closing a connection that does not finish its frame", "remote", c.remote, "why", why)
					c.fail(fmt.Errorf("read from %s: %s", c.remote, why))
				}
			}
		}
	}
}

// full reports whether the server serves accepts connections already
// (with those in a TLS handshake), logging the refusal.
func (s *Server) full(nc net.Conn) bool {
	if s.accepts <= 0 {
		return false
	}
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	if n+int(s.handshaking.Load()) < s.accepts {
		return false
	}
	if now := time.Now().UnixNano(); now-s.refusedLog.Load() >= int64(time.Second) {
		s.refusedLog.Store(now)
		s.log.Warn("weft: refusing a connection: the server serves its limit already; raise accepts on the provider's protocol", "addr", s.Addr().String(),
			"remote", nc.RemoteAddr().String(), "accepts", s.accepts)
	}
	return true
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Channels returns the open connections.
func (s *Server) Channels() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// NumChannels is the number of open connections.
func (s *Server) NumChannels() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// Temporary failures (EMFILE...) back off instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("weft: accept", "addr", s.Addr().String(), "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
			continue
		}
		backoff = 0
		if s.full(nc) {
			nc.Close()
			continue
		}
		if s.security != nil {
			s.wg.Add(1)
			s.handshaking.Add(1)
			go func() {
				defer s.wg.Done()
				nc := s.secured(nc)
				s.handshaking.Add(-1)
				if nc != nil {
					s.serve(nc)
				}
			}()
			continue
		}
		if s.tls != nil {
			// The handshake runs off the accept loop: a slow or hostile
			// client holds only its own connection.
			s.wg.Add(1)
			s.handshaking.Add(1)
			go func() {
				defer s.wg.Done()
				tc := s.handshake(nc)
				s.handshaking.Add(-1)
				if tc != nil {
					s.serve(tc)
				}
			}()
			continue
		}
		if !s.serve(nc) {
			return
		}
	}
}

// serve starts a connection's loops; false when the server is closed.
func (s *Server) serve(nc net.Conn) bool {
	setUserTimeout(tcpOf(nc))
	c := newConn(nc, s.codec, &serverHandler{s: s, inner: s.handler}, s.log)
	c.inliner, _ = s.handler.(Inliner) // the exchange server serves inline
	c.preparer, _ = s.handler.(Preparer)
	c.pauseReads = true
	c.big = s.big
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return false
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.start()
	return true
}

// handshake runs the server side of TLS on nc, bounded in time and by the
// server's close; a failure closes nc and is logged (at most once per
// dialLogInterval): the server serves everybody else.
func (s *Server) handshake(nc net.Conn) *tls.Conn {
	return s.handshakeWith(nc, s.tls, "server "+s.Addr().String()+" takes TLS connections only: configure tls (ca-cert-file, tls-cert-file, tls-key-file) on this consumer")
}

// handshakeWith is handshake with the config cfg; why is what a plain
// client is told.
func (s *Server) handshakeWith(nc net.Conn, cfg *tls.Config, why string) *tls.Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
	defer cancel()
	go func() { // the server's close ends the handshake too
		select {
		case <-s.done:
			nc.SetDeadline(time.Now())
			cancel()
		case <-ctx.Done():
		}
	}()
	// A plain client sends a frame where a ClientHello belongs: it gets an
	// answer in its protocol saying why, rather than a bare close (Dubbo:
	// an error response to its request; HTTP/2: SETTINGS and GOAWAY).
	pc := &peekedConn{Conn: nc, r: bufio.NewReaderSize(nc, 512)}
	nc.SetReadDeadline(time.Now().Add(tlsHandshakeTimeout))
	if hdr, err := pc.r.Peek(16); err == nil {
		plain := false
		if r, ok := s.codec.(PlainRefuser); ok {
			// It may wait a second for the client's first call; its
			// answer still goes out after that wait.
			nc.SetReadDeadline(time.Now().Add(time.Second))
			nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
			plain = r.RefusePlain(struct {
				io.Reader
				io.Writer
			}{pc.r, nc}, hdr, why)
		} else if peeker, ok := s.codec.(extension.RequestPeeker); ok {
			var id uint64
			if id, plain = peeker.PeekRequest(hdr); plain {
				if answer, err := s.codec.Encode(nil, &Response{ID: id, Status: kernel.ResponseClientError, ErrMsg: "weft: network: " + why}); err == nil {
					nc.SetWriteDeadline(time.Now().Add(time.Second))
					nc.Write(answer)
				}
			}
		}
		if plain {
			lingerClose(nc, pc.r)
			s.logHandshake(nc, errors.New("a plain (non-TLS) client"))
			return nil
		}
	}
	nc.SetDeadline(time.Time{}) // ctx bounds the handshake
	tc := tls.Server(pc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		s.logHandshake(nc, err)
		return nil
	}
	return tc
}

// secureBy makes the server's connections secured by the ServerSecurity
// name (extension.KeySecurity in its URL).
func (s *Server) secureBy(t *Transporter, name string, url *kernel.URL) error {
	if t.security == nil {
		return fmt.Errorf("weft: server %s asks for security %q, and this protocol has no security extensions", url.Address(), name)
	}
	sec, err := t.security(name)
	if err != nil {
		return fmt.Errorf("weft: server %s: security: %w", url.Address(), err)
	}
	ss, ok := sec.(extension.ServerSecurity)
	if !ok {
		return fmt.Errorf("weft: server %s: security %q secures clients only", url.Address(), name)
	}
	if err := ss.Serve(url); err != nil {
		return fmt.Errorf("weft: server %s: security %q: %w", url.Address(), name, err)
	}
	s.security, s.url, s.secureALPN = ss, url, t.secureALPN
	return nil
}

// secured serves nc as its ServerSecurity says: plain, TLS (a plain
// client told why, as handshake does), or refused (closed, logged at most
// once per interval); nil when it is not served.
func (s *Server) secured(nc net.Conn) net.Conn {
	cfg, err := s.security.ServerTLS(s.url, nc)
	if err != nil {
		nc.Close()
		s.logHandshake(nc, err)
		return nil
	}
	if cfg == nil {
		return nc
	}
	if len(cfg.NextProtos) == 0 && len(s.secureALPN) > 0 {
		cfg = cfg.Clone()
		cfg.NextProtos = s.secureALPN
	}
	why := "server " + s.Addr().String() + " takes TLS connections only, as its security (" + s.url.Param(extension.KeySecurity) +
		") says: call it with that security (a mesh's consumer, whose cluster says TLS)"
	if tc := s.handshakeWith(nc, cfg, why); tc != nil {
		return tc
	}
	return nil
}

// lingerClose closes a connection the server has just answered without
// reading all the client sent. Closing at once loses the answer twice over:
// a socket closed with unread input is reset, and a reset can discard the
// answer before the client reads it; and dubbo-go's getty client drops a
// response that arrives together with the end of its connection (it
// reports only a read timeout). So the server reads what comes for up to a
// second and 64 KiB, or until the client closes, and then closes.
func lingerClose(nc net.Conn, r io.Reader) {
	nc.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(r, 64<<10))
	nc.Close()
}

// logHandshake warns of a failed handshake, at most once per
// dialLogInterval.
func (s *Server) logHandshake(nc net.Conn, err error) {
	if now := time.Now().UnixNano(); now-s.handshakeLog.Load() >= int64(dialLogInterval) {
		s.handshakeLog.Store(now)
		s.log.Warn("weft: TLS handshake failed", "addr", s.Addr().String(), "remote", nc.RemoteAddr().String(),
			"err", err, "hint", explainTLS(err))
	}
}

// tcpOf is the TCP connection under a server's TLS and peeking layers.
func tcpOf(nc net.Conn) net.Conn {
	for {
		switch c := nc.(type) {
		case *tls.Conn:
			nc = c.NetConn()
		case *peekedConn:
			nc = c.Conn
		default:
			return nc
		}
	}
}

// peekedConn reads through r, which may hold bytes already peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// serverHandler forgets connections when they close.
type serverHandler struct {
	s     *Server
	inner extension.ChannelHandler
}

func (h *serverHandler) Connected(ch extension.Channel) { h.inner.Connected(ch) }
func (h *serverHandler) Disconnected(ch extension.Channel) {
	h.s.mu.Lock()
	delete(h.s.conns, ch.(*Conn))
	h.s.mu.Unlock()
	h.inner.Disconnected(ch)
}
func (h *serverHandler) Received(ch extension.Channel, msg any) { h.inner.Received(ch, msg) }
func (h *serverHandler) Caught(ch extension.Channel, err error) { h.inner.Caught(ch, err) }

// Close stops accepting and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	close(s.done)
	err := s.ln.Close()
	s.wg.Wait()
	for _, c := range conns {
		c.Close()
		c.loops.Wait()
	}
	return err
}
