package netty

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the transporter's extension name.
const Name = "netty"

// Transporter opens TCP servers and client connections.
type Transporter struct {
	log *slog.Logger
}

// NewTransporter returns a transporter logging to log.
func NewTransporter(log *slog.Logger) *Transporter { return &Transporter{log: log} }

var _ extension.Transporter = (*Transporter)(nil)

// Bind listens on the URL's host:port and serves every connection with codec
// and handler.
func (t *Transporter) Bind(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (extension.Server, error) {
	addr := net.JoinHostPort(url.Host, strconv.Itoa(url.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("weft: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, codec: codec, handler: handler, log: t.log, conns: map[*Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Connect dials the URL's address; `connect.timeout` (ms, default 3000)
// bounds the dial.
func (t *Transporter) Connect(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (extension.Channel, error) {
	return t.dial(url, codec, handler)
}

func (t *Transporter) dial(url *kernel.URL, codec extension.Codec, handler extension.ChannelHandler) (*Conn, error) {
	timeout := time.Duration(url.ParamInt("connect.timeout", 3000)) * time.Millisecond
	nc, err := net.DialTimeout("tcp", url.Address(), timeout)
	if err != nil {
		return nil, kernel.Wrap(kernel.CodeNetwork, err, "connect to %s", url.Address())
	}
	c := newConn(nc, codec, handler, t.log)
	c.start()
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
		c := newConn(nc, s.codec, &serverHandler{s: s, inner: s.handler}, s.log)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		c.start()
	}
}

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
