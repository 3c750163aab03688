// Command replay tells which side of a weft dubbo exchange limits it: it
// stands in for one side with the cheapest program that speaks the same
// bytes, so that weft's consumer can be measured against an ideal provider
// and weft's provider against an ideal consumer, beside the ideal pair.
//
// It records one real request and its answer through a relay (capture), then
// replays them, ids patched, as a consumer (client: callers multiplexed on
// one connection, a writer that flushes when its queue is empty, as
// ../shared/peers' raw TCP client) or as a provider (server: a goroutine per
// request, one writer, the recorded answer), with no serialization at all.
//
//	replay -mode capture -listen 127.0.0.1:21901 -target 127.0.0.1:21900 -dir D
//	replay -mode server -listen 127.0.0.1:21900 -dir D
//	replay -mode client -target 127.0.0.1:21900 -dir D -c 16 -d 5s
//
// test/bench/ceiling.sh runs the four pairs interleaved.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const (
	headerLen = 16
	flagEvent = 0x20
	// maxFrame bounds what the relay and the replayers accept: this is a
	// benchmark tool on loopback, not a parser for hostile peers, but a
	// stray connection must not make it allocate gigabytes.
	maxFrame = 64 << 20
)

func main() {
	mode := flag.String("mode", "client", "capture, server or client")
	listen := flag.String("listen", "127.0.0.1:21901", "capture and server: address to listen on (loopback)")
	target := flag.String("target", "127.0.0.1:21900", "capture and client: the provider (loopback)")
	dir := flag.String("dir", ".", "folder for req.bin and resp.bin")
	conc := flag.Int("c", 16, "client: concurrent callers on one connection")
	dur := flag.Duration("d", 5*time.Second, "client: measured duration (max 60s)")
	warm := flag.Duration("warmup", time.Second, "client: unmeasured warm-up (max 10s)")
	maxLife := flag.Duration("max-life", 10*time.Minute, "exit after this long")
	flag.Parse()
	for _, a := range []string{*listen, *target} {
		if !loopback(a) {
			fail(fmt.Errorf("%s: loopback addresses only", a))
		}
	}
	*dur, *warm = min(*dur, time.Minute), min(*warm, 10*time.Second)
	time.AfterFunc(*maxLife, func() { fail(errors.New("max-life reached")) })
	var err error
	switch *mode {
	case "capture":
		err = capture(*listen, *target, *dir)
	case "server":
		err = server(*listen, *dir)
	case "client":
		err = client(*target, *dir, *conc, *dur, *warm)
	default:
		err = fmt.Errorf("unknown -mode %q: capture, server or client", *mode)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "replay:", err)
	os.Exit(1)
}

func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(h)
	return err == nil && (h == "localhost" || (ip != nil && ip.IsLoopback()))
}

// readFrame reads one Dubbo frame, header and body.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != 0xda || hdr[1] != 0xbb {
		return nil, errors.New("not a dubbo frame")
	}
	n := binary.BigEndian.Uint32(hdr[12:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	f := make([]byte, headerLen+int(n))
	copy(f, hdr[:])
	_, err := io.ReadFull(r, f[headerLen:])
	return f, err
}

// capture relays consumers' connections to the provider, one at a time and
// call by call, and keeps the last call and answer that are not heartbeats;
// it returns once a connection that carried a call has closed (one that
// carried none, a port probe, is passed over).
func capture(listen, target, dir string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	for {
		cc, err := ln.Accept()
		if err != nil {
			return err
		}
		kept, err := relay(cc, target, dir)
		cc.Close()
		if err != nil || kept > 0 {
			return err
		}
	}
}

func relay(cc net.Conn, target, dir string) (kept int, err error) {
	sc, err := net.Dial("tcp", target)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	cr, sr := bufio.NewReader(cc), bufio.NewReader(sc)
	for {
		req, err := readFrame(cr)
		if err != nil {
			return kept, nil // the consumer is done
		}
		if _, err := sc.Write(req); err != nil {
			return kept, err
		}
		resp, err := readFrame(sr)
		if err != nil {
			return kept, err
		}
		if _, err := cc.Write(resp); err != nil {
			return kept, nil
		}
		if req[2]&flagEvent == 0 {
			if err := os.WriteFile(filepath.Join(dir, "req.bin"), req, 0o644); err != nil {
				return kept, err
			}
			if err := os.WriteFile(filepath.Join(dir, "resp.bin"), resp, 0o644); err != nil {
				return kept, err
			}
			kept++
		}
	}
}

// server answers every request with the recorded answer, its id patched, on
// a goroutine per request, through one writer that flushes when its queue
// is empty; heartbeats get their event answer.
func server(listen, dir string) error {
	resp, err := os.ReadFile(filepath.Join(dir, "resp.bin"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveConn(conn, resp)
	}
}

func serveConn(conn net.Conn, resp []byte) {
	defer conn.Close()
	out := make(chan []byte, 1024)
	done := make(chan struct{})
	defer close(done)
	go func() {
		w := bufio.NewWriterSize(conn, 64<<10)
		for {
			select {
			case b := <-out:
				if _, err := w.Write(b); err != nil {
					conn.Close()
					return
				}
				if len(out) == 0 && w.Flush() != nil {
					conn.Close()
					return
				}
			case <-done:
				return
			}
		}
	}()
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		go func() {
			var b []byte
			if f[2]&flagEvent != 0 {
				// A heartbeat: the same frame back as a response (flags
				// cleared but serialization and event, status OK).
				b = f
				b[2] &^= 0xc0
				b[3] = 20
			} else {
				b = append([]byte(nil), resp...)
				copy(b[4:12], f[4:12])
			}
			select {
			case out <- b:
			case <-done:
			}
		}()
	}
}

// client runs conc callers, each sending the recorded request (its id
// patched) and waiting for the answer of that id, on one connection.
func client(target, dir string, conc int, dur, warm time.Duration) error {
	req, err := os.ReadFile(filepath.Join(dir, "req.bin"))
	if err != nil {
		return err
	}
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mu sync.Mutex
	pending := map[uint64]chan struct{}{}
	send := make(chan []byte, conc+16)
	go func() {
		w := bufio.NewWriterSize(conn, 64<<10)
		for f := range send {
			if _, err := w.Write(f); err != nil {
				return
			}
			if len(send) == 0 && w.Flush() != nil {
				return
			}
		}
	}()
	dead := make(chan struct{})
	go func() {
		defer close(dead)
		r := bufio.NewReaderSize(conn, 64<<10)
		for {
			f, err := readFrame(r)
			if err != nil {
				return
			}
			id := binary.BigEndian.Uint64(f[4:12])
			mu.Lock()
			ch := pending[id]
			delete(pending, id)
			mu.Unlock()
			if ch != nil {
				ch <- struct{}{}
			}
		}
	}()
	var next atomic.Uint64
	var measuring, stop atomic.Bool
	var calls atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan struct{}, 1)
			for !stop.Load() {
				f := append([]byte(nil), req...)
				id := next.Add(1)
				binary.BigEndian.PutUint64(f[4:12], id)
				mu.Lock()
				pending[id] = ch
				mu.Unlock()
				t := time.Now()
				send <- f
				select {
				case <-ch:
				case <-dead:
					return
				}
				if measuring.Load() {
					lat[g] = append(lat[g], time.Since(t))
					calls.Add(1)
				}
			}
		}()
	}
	time.Sleep(warm)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(dur)
	measuring.Store(false)
	n, took := calls.Load(), time.Since(start)
	stop.Store(true)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return errors.New("no call answered")
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	us := func(d time.Duration) int64 { return d.Microseconds() }
	fmt.Printf("qps=%.0f p50=%dus p99=%dus calls=%d\n", float64(n)/took.Seconds(), us(all[len(all)/2]), us(all[len(all)*99/100]), n)
	return nil
}
