package qos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Prompt is Dubbo's telnet prompt.
const Prompt = "dubbo>"

const banner = "weft QoS: Dubbo's commands (help lists them; quit ends the session)\r\n"

// Telnet's command bytes (RFC 854) a client may send in the line.
const (
	iac  = 255
	dont = 254 // WILL 251, WONT 252, DO 253, DONT 254: three-byte negotiations
	will = 251
	sb   = 250 // subnegotiation, up to IAC SE
	se   = 240
	ip   = 244 // interrupt process (^C)
	abrt = 238
)

func (s *Server) telnet(c net.Conn, br *bufio.Reader, greet bool) {
	var release sync.Once
	free := func() { release.Do(func() { <-s.sessions }) }
	select {
	case s.sessions <- struct{}{}:
		defer free()
	default:
		s.write(c, fmt.Sprintf("too many telnet sessions (at most %d at once): close one, or use HTTP: curl http://%s/help\r\n",
			s.cfg.MaxSessions, s.Addr()))
		return
	}
	if greet && !s.write(c, banner+Prompt) {
		return
	}
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			// Nothing more is read from a client that sends a line this
			// long: it is not a person at a terminal.
			free() // the session is over; the drain holds only its connection
			s.write(c, fmt.Sprintf("\r\nline too long: at most %d bytes; closing\r\n", s.cfg.MaxLine))
			drain(c)
			return
		case err != nil && isTimeout(err):
			s.write(c, fmt.Sprintf("\r\nidle for %v; closing\r\n", s.cfg.IdleTimeout))
			return
		case err != nil:
			return
		}
		text, interrupted := stripTelnet(line)
		if interrupted {
			s.write(c, "\r\nBYE!\r\n")
			return
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			if !s.write(c, Prompt) {
				return
			}
			continue
		}
		args := fields[1:]
		if cmd, ok := s.lookup(fields[0]); ok && cmd.line {
			args = []string{strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), fields[0]))}
		}
		res := s.run(fields[0], args, true, isLoopback(c.RemoteAddr().String()))
		out := strings.ReplaceAll(strings.TrimRight(res.text, "\n"), "\n", "\r\n") + "\r\n"
		if res.quit {
			s.write(c, out)
			return
		}
		if !s.write(c, out+Prompt) {
			return
		}
	}
}

// write sends text within writeTimeout: a client that does not read its
// answers is closed rather than waited for.
func (s *Server) write(c net.Conn, text string) bool {
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.Write([]byte(text))
	return err == nil
}

// drain half-closes c and reads (a bounded amount, for a bounded time)
// what the client still sends, so that closing does not reset the
// connection before the client has read why it is closed.
func drain(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.CopyN(io.Discard, c, 1<<20)
}

// stripTelnet removes telnet's negotiation bytes from a line (a real telnet
// client sends some on connect) and reports an interrupt (^C, which telnet
// sends as IAC IP), taken as quit.
func stripTelnet(line []byte) (string, bool) {
	if bytes.IndexByte(line, iac) < 0 {
		return string(line), false
	}
	out := make([]byte, 0, len(line))
	for i := 0; i < len(line); i++ {
		b := line[i]
		if b != iac {
			out = append(out, b)
			continue
		}
		if i+1 >= len(line) {
			break
		}
		i++
		switch cmd := line[i]; {
		case cmd == iac: // an escaped 255
			out = append(out, iac)
		case cmd == ip || cmd == abrt:
			return "", true
		case cmd >= will && cmd <= dont:
			i++ // the option byte
		case cmd == sb:
			for i+1 < len(line) && (line[i] != iac || line[i+1] != se) {
				i++
			}
			i++
		}
	}
	return string(out), false
}
