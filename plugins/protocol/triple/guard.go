package triple

import (
	"fmt"
	"time"

	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	"golang.org/x/net/http2/hpack"
)

// What a server connection checks of a peer beyond HTTP/2's framing: the
// fields of each request (RFC 9113 8.2, 8.3), the rate of streams it
// resets or has refused (rapid reset, CVE-2023-44487), and the deadlines
// of header blocks (CVE-2024-27316) and request bodies left unfinished.

// headerCheck validates a header block field by field as the decoder
// emits it, so that a request costs no second pass over its fields. bad
// says why the block is malformed; the stream is then reset with
// PROTOCOL_ERROR.
type headerCheck struct {
	pseudo  uint8 // the request pseudo-headers seen (pseudoMethod...)
	regular bool  // a regular field was seen: no pseudo-header may follow
	connect bool  // :method is CONNECT
	bad     string
	length  int64 // content-length, -1 without one
}

const (
	pseudoMethod = 1 << iota
	pseudoScheme
	pseudoPath
	pseudoAuthority
)

func (h *headerCheck) reset() { *h = headerCheck{length: -1} }

func (h *headerCheck) check(f hpack.HeaderField) {
	if h.bad != "" {
		return
	}
	name := f.Name
	if name == "" {
		h.bad = "an empty field name"
		return
	}
	if name[0] == ':' {
		var bit uint8
		switch name {
		case ":method":
			bit = pseudoMethod
			h.connect = f.Value == "CONNECT"
		case ":scheme":
			bit = pseudoScheme
		case ":path":
			bit = pseudoPath
			if f.Value == "" {
				h.bad = "an empty :path"
				return
			}
		case ":authority":
			bit = pseudoAuthority
		default:
			h.bad = "a pseudo-header that is no request's (:status, or unknown)"
			return
		}
		if h.regular {
			h.bad = "a pseudo-header after a regular field"
			return
		}
		if h.pseudo&bit != 0 {
			h.bad = "a pseudo-header twice"
			return
		}
		h.pseudo |= bit
	} else {
		h.regular = true
		for i := 0; i < len(name); i++ {
			if c := name[i]; c <= ' ' || c >= 0x7f || c-'A' < 26 {
				h.bad = "a field name with an upper-case letter or a character no token has"
				return
			}
		}
		switch name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			h.bad = "a connection-specific field"
			return
		case "te":
			if f.Value != "trailers" {
				h.bad = "te other than trailers"
				return
			}
		case "content-length":
			n, ok := parseLength(f.Value)
			if !ok || h.length >= 0 && h.length != n {
				h.bad = "a bad content-length"
				return
			}
			h.length = n
		}
	}
	for i := 0; i < len(f.Value); i++ {
		if c := f.Value[i]; c == 0 || c == '\n' || c == '\r' {
			h.bad = "a field value with NUL, CR or LF"
			return
		}
	}
}

// request reports whether the block had the pseudo-headers a request
// needs, once each (RFC 9113 8.3.1).
func (h *headerCheck) request() bool {
	if h.connect {
		return h.pseudo&pseudoAuthority != 0 && h.pseudo&(pseudoScheme|pseudoPath) == 0
	}
	const all = pseudoMethod | pseudoScheme | pseudoPath
	return h.pseudo&all == all
}

// parseLength reads a content-length: decimal digits only.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Rapid reset: a client that resets the streams it opens (or opens more
// than SETTINGS_MAX_CONCURRENT_STREAMS, which are refused) makes the
// server parse and dispatch calls nobody waits for. Netty's
// Http2MaxRstFrameDecoder closes past 200 RST_STREAM frames in 30 s;
// x/net and grpc-go bound the handlers a connection may run instead. Here
// a connection is sent GOAWAY ENHANCE_YOUR_CALM and closed when, over a
// sliding 10 s, its resets and refusals are more than maxResets and more
// than half of the streams it opened: a client that cancels some calls
// (deadlines, hedging) opens far more than it resets, and one that
// resets under 20 a second never meets the rule.
const (
	resetWindow = 10 * time.Second
	maxResets   = 200
)

// resetRate counts a connection's resets over two consecutive windows;
// the previous one weighs by the share of it still inside the last
// resetWindow.
type resetRate struct {
	start                time.Time // the current window's
	resets, prevResets   int
	openedAt, prevOpened int // sc.opened when the window started; streams opened in the previous one
}

// abused counts a reset by the client of a stream not yet answered, or a
// stream refused, and closes the connection past the rate.
func (sc *serverConn) abused(what string) {
	r := &sc.rates
	now := time.Now()
	if el := now.Sub(r.start); el >= resetWindow {
		if r.start.IsZero() || el >= 2*resetWindow {
			r.prevResets, r.prevOpened = 0, 0
			r.start = now
		} else {
			r.prevResets, r.prevOpened = r.resets, sc.opened-r.openedAt
			r.start = r.start.Add(resetWindow)
		}
		r.resets, r.openedAt = 0, sc.opened
	}
	r.resets++
	w := 1 - float64(now.Sub(r.start))/float64(resetWindow)
	resets := float64(r.resets) + w*float64(r.prevResets)
	opened := float64(sc.opened-r.openedAt) + w*float64(r.prevOpened)
	if resets > maxResets && 2*resets > opened {
		sc.fail(h2.CodeEnhanceYourCalm, "%s: %.0f of the %.0f streams opened in %v (rapid reset)", what, resets, opened, resetWindow)
	}
}

// windowUpdateFlood closes a connection whose client sends more
// WINDOW_UPDATE frames than the server's DATA could call for, Envoy's
// rule (max_inbound_window_update_frames_per_data_frame_sent, 10): more
// than 5 + 2 x (streams opened + 10 x DATA frames sent). A client gives
// window back as it reads what the server sent; one that sends updates
// for nothing makes the server do work for nothing, as fast as it can
// write them (before: two connections kept both cores busy, never closed).
func (sc *serverConn) windowUpdateFlood() bool {
	if sc.windowUpdates <= 5+2*(int64(sc.opened)+10*sc.dataOut.Load()) {
		return false
	}
	sc.fail(h2.CodeEnhanceYourCalm, "%d WINDOW_UPDATE frames for %d streams and %d DATA frames sent (a flood)",
		sc.windowUpdates, sc.opened, sc.dataOut.Load())
	return true
}

// The deadlines of a connection run on a clock of its own, a timer that
// ticks every watchTick only while a header block spanning frames or a
// unary request body is open, and stops when neither is: a call pays for
// no timer. The read loop checks the deadlines on each frame (sweep);
// the clock closes a connection that leaves a header block open past
// blockDeadline, or a request body past bodyDeadline with nothing
// received meanwhile, when no frame comes to be checked on.
var (
	watchTick = time.Second
	// blockDeadline bounds a header block, HEADERS to the CONTINUATION
	// with END_HEADERS: a client sends it at once.
	blockDeadline = 5 * time.Second
	// bodyDeadline bounds a unary request from its HEADERS to its last
	// DATA, or its grpc-timeout when shorter: its stream is then answered
	// DEADLINE_EXCEEDED and reset, and what it held freed.
	bodyDeadline = 30 * time.Second
)

func (f *framing) tick() time.Duration {
	if f.watchTick <= 0 {
		return watchTick
	}
	return f.watchTick
}

func (f *framing) blockLimit() time.Duration {
	if f.blockDeadline <= 0 {
		return blockDeadline
	}
	return f.blockDeadline
}

func (f *framing) bodyLimit() time.Duration {
	if f.bodyDeadline <= 0 {
		return bodyDeadline
	}
	return f.bodyDeadline
}

// ticks is d in ticks of the clock, rounded up.
func (f *framing) ticks(d time.Duration) uint32 {
	t := f.tick()
	return uint32((d + t - 1) / t)
}

// watch starts the clock if it is stopped.
func (sc *serverConn) watch() {
	if !sc.armed.Load() && sc.armed.CompareAndSwap(false, true) {
		sc.timer.Reset(sc.f.tick())
	}
}

// watchdog is the clock's tick.
func (sc *serverConn) watchdog() {
	f := sc.f
	t := sc.tick.Add(1)
	if b := sc.blockAt.Load(); b != 0 && t+1-b > f.ticks(f.blockLimit()) {
		sc.abort(h2.CodeEnhanceYourCalm, fmt.Sprintf("a header block not finished within %v", f.blockLimit()))
		return
	}
	if sc.pending.Load() > 0 && t-sc.seen.Load() > f.ticks(f.bodyLimit()) {
		sc.abort(h2.CodeEnhanceYourCalm, fmt.Sprintf("a request body not finished, and nothing received, for %v", f.bodyLimit()))
		return
	}
	if sc.blockAt.Load() == 0 && sc.pending.Load() == 0 {
		sc.armed.Store(false)
		// The read loop may have needed the clock since it looked.
		if sc.blockAt.Load() == 0 && sc.pending.Load() == 0 || !sc.armed.CompareAndSwap(false, true) {
			return
		}
	}
	sc.mu.Lock()
	if !sc.closed {
		sc.timer.Reset(f.tick())
	}
	sc.mu.Unlock()
}

// sweep runs on the read loop at its first frame of each tick: it answers
// the unary requests whose body passed its deadline.
func (sc *serverConn) sweep(t uint32) {
	sc.swept = t
	sc.seen.Store(t)
	if sc.pending.Load() == 0 {
		return
	}
	for _, st := range sc.streams {
		if !st.pending {
			continue
		}
		d := sc.f.bodyLimit()
		if v := header(st.headers, "grpc-timeout"); v != "" {
			if g, err := parseTimeout(v); err == nil && g < d {
				d = g
			}
		}
		// born may be up to a tick late: one more makes sure d passed.
		if t-st.born > sc.f.ticks(d) {
			sc.answerNow(st, 200, statusDeadlineExceeded, fmt.Sprintf(
				"the request did not end within %v of its HEADERS (its grpc-timeout, or the server's bound on a request body)", d))
		}
	}
}
