package qos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// DefaultPort is Dubbo's QoS port.
const DefaultPort = 22222

// The bounds of a server whose Config leaves them zero. Every one of them
// keeps a client (hostile, stuck or just forgotten in a terminal) from
// holding memory or goroutines without end.
const (
	// DefaultMaxConns bounds the connections served at once, telnet and
	// HTTP together, including those whose protocol is not known yet.
	DefaultMaxConns = 64
	// DefaultMaxSessions bounds the telnet sessions open at once, well
	// below DefaultMaxConns, so that forgotten terminals cannot starve
	// Kubernetes' probes.
	DefaultMaxSessions = 8
	// DefaultMaxLine bounds a telnet line, and so what one read may buffer.
	DefaultMaxLine = 4096
	// DefaultIdleTimeout closes a telnet session that sends nothing.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultDetectTimeout is how long a new connection may stay silent
	// before it is taken for telnet and greeted (Dubbo waits 500 ms too:
	// an HTTP client speaks first, a telnet user waits for the prompt).
	DefaultDetectTimeout = 500 * time.Millisecond
	// DefaultCommandTimeout bounds a command's registry calls (online,
	// offline).
	DefaultCommandTimeout = 30 * time.Second

	writeTimeout     = 10 * time.Second
	httpHeaderBytes  = 8 << 10
	httpReadTimeout  = 10 * time.Second
	httpWriteTimeout = 30 * time.Second // /metrics may be large
	httpIdleTimeout  = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on: 127.0.0.1:22222 for local access
	// only, :22222 for every interface, port 0 for a free port.
	Addr string
	App  App
	// Metrics serves /metrics; nil answers 404 "metrics disabled".
	Metrics http.Handler
	Log     *slog.Logger

	MaxConns       int
	MaxSessions    int
	MaxLine        int
	IdleTimeout    time.Duration
	DetectTimeout  time.Duration
	CommandTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxLine <= 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.DetectTimeout <= 0 {
		c.DetectTimeout = DefaultDetectTimeout
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
}

// Server is a running QoS server.
type Server struct {
	cfg      Config
	ln       net.Listener
	httpSrv  *http.Server
	httpLn   *handoff
	conns    chan struct{} // a slot per connection served
	sessions chan struct{} // a slot per telnet session
	cmds     []command
	ctx      context.Context
	cancel   context.CancelFunc

	mu     sync.Mutex
	closed bool
	open   map[net.Conn]struct{}
	wg     sync.WaitGroup // the accept loop, the HTTP server, every connection and HTTP handler
	// httpConns counts the HTTP server's connection goroutines, which
	// http.Server.Close does not wait for (one may linger half a second
	// after refusing a request).
	httpConns sync.WaitGroup
}

// Listen binds cfg.Addr and serves until Close. A bind error (the port is
// taken) is returned as it is, for the App to decide (weft logs it and
// starts without QoS, as Dubbo does).
func Listen(cfg Config) (*Server, error) {
	if cfg.App == nil {
		return nil, errors.New("qos: Config.App is nil: the server needs the application it reports on")
	}
	cfg.defaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ln: ln, ctx: ctx, cancel: cancel,
		conns: make(chan struct{}, cfg.MaxConns), sessions: make(chan struct{}, cfg.MaxSessions),
		open: map[net.Conn]struct{}{}, cmds: builtinCommands()}
	s.httpLn = &handoff{addr: ln.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	s.httpSrv = &http.Server{
		Handler:           s.httpHandler(),
		ReadHeaderTimeout: httpReadTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// StateNew is reported by Serve's goroutine before the connection's
		// own starts, and Close waits for Serve before httpConns.
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.httpConns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.httpConns.Done()
			}
		},
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.httpSrv.Serve(s.httpLn)
	}()
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on (with the port it got).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening, closes every connection, cancels the commands
// running and waits until every goroutine of the server has returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	s.httpLn.close()
	s.httpSrv.Close()
	s.wg.Wait()
	s.httpConns.Wait()
	return err
}

// track adds a goroutine's worth of work unless the server is closing;
// Adds happen under mu while not closed, so Close's Wait sees them all.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if c != nil {
		s.open[c] = struct{}{}
	}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.forget(c)
	s.wg.Done()
}

// forget drops c from the connections Close closes.
func (s *Server) forget(c net.Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does,
			// rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Log.Warn("weft: qos: accept failed; retrying", "addr", s.Addr(), "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-s.ctx.Done():
				return
			}
		}
		backoff = 0
		select {
		case s.conns <- struct{}{}:
		default:
			// Full: say so and close, without a goroutine.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			fmt.Fprintf(c, "too many QoS connections (at most %d at once); try again later\r\n", s.cfg.MaxConns)
			c.Close()
			continue
		}
		if !s.track(c) {
			c.Close()
			<-s.conns
			return
		}
		go s.serve(c)
	}
}

// serve finds out whether c speaks HTTP or telnet, from its first bytes.
func (s *Server) serve(c net.Conn) {
	handedOff := false
	defer func() {
		if handedOff {
			// Still in s.open until the HTTP server closes it, so that
			// Close reaches it even if the HTTP server has not yet.
			s.wg.Done()
			return
		}
		c.Close()
		<-s.conns
		s.untrack(c)
	}()
	br := bufio.NewReaderSize(c, s.cfg.MaxLine)
	greet := false
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.DetectTimeout))
		_, err := br.Peek(br.Buffered() + 1)
		if err != nil {
			if !isTimeout(err) {
				return // closed, or EOF before a word
			}
			// Silent: a telnet user waiting for the prompt. (Bytes that
			// came before the silence are taken as telnet too.)
			greet = br.Buffered() == 0
			break
		}
		head, _ := br.Peek(br.Buffered())
		if yes, undecided := looksHTTP(head); !undecided {
			if yes {
				c.SetReadDeadline(time.Time{})
				hc := &handedConn{Conn: c, r: br, release: func() { s.forget(c); <-s.conns }}
				if s.httpLn.give(hc) {
					handedOff = true
				}
				return
			}
			break
		}
	}
	s.telnet(c, br, greet)
}

// looksHTTP reports whether head starts an HTTP request line, or that it
// cannot tell yet (head is a prefix of a method).
func looksHTTP(head []byte) (yes, undecided bool) {
	for _, m := range []string{"GET ", "POST ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "} {
		switch {
		case bytes.HasPrefix(head, []byte(m)):
			return true, false
		case len(head) < len(m) && bytes.HasPrefix([]byte(m), head):
			undecided = true
		}
	}
	return false, undecided
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// handedConn is a connection given to the HTTP server with the bytes
// already read for detection in front; closing it frees its slot.
type handedConn struct {
	net.Conn
	r       io.Reader
	once    sync.Once
	release func()
}

func (h *handedConn) Read(p []byte) (int, error) { return h.r.Read(p) }

func (h *handedConn) Close() error {
	err := h.Conn.Close()
	h.once.Do(h.release)
	return err
}

// handoff is the net.Listener the HTTP server accepts from: connections
// the detector found to speak HTTP.
type handoff struct {
	addr      net.Addr
	ch        chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func (h *handoff) give(c net.Conn) bool {
	select {
	case h.ch <- c:
		return true
	case <-h.done:
		return false
	}
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) close()         { h.closeOnce.Do(func() { close(h.done) }) }
func (h *handoff) Close() error   { h.close(); return nil }
func (h *handoff) Addr() net.Addr { return h.addr }
