// Command rawtcp is the benchmark's floor: what plain Go TCP does on this
// machine with Dubbo-sized frames (16-byte header + body), one connection, a
// goroutine per request on the server, requests correlated by id, no
// serialization. weft's targets are expressed as a share of it.
//
//	rawtcp -mode server -addr 127.0.0.1:20990
//	rawtcp -mode client -addr 127.0.0.1:20990 -c 16 -d 10s -size 1024
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "server", "server or client")
	addr := flag.String("addr", "127.0.0.1:20990", "address")
	conc := flag.Int("c", 16, "concurrent callers")
	dur := flag.Duration("d", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", time.Second, "unmeasured warm-up")
	size := flag.Int("size", 1024, "body bytes")
	flag.Parse()
	var err error
	if *mode == "server" {
		err = serve(*addr)
	} else {
		err = client(*addr, *conc, *dur, *warm, *size)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawtcp:", err)
		os.Exit(1)
	}
}

func serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "rawtcp: listening on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			var wmu sync.Mutex
			r := bufio.NewReaderSize(c, 64<<10)
			hdr := make([]byte, 16)
			for {
				if _, err := io.ReadFull(r, hdr); err != nil {
					return
				}
				n := binary.BigEndian.Uint32(hdr[12:])
				frame := make([]byte, 16+int(n))
				copy(frame, hdr)
				if _, err := io.ReadFull(r, frame[16:]); err != nil {
					return
				}
				go func() {
					frame[2] &^= 0x80 // a response
					wmu.Lock()
					c.Write(frame)
					wmu.Unlock()
				}()
			}
		}()
	}
}

func client(addr string, conc int, dur, warm time.Duration, size int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		mu      sync.Mutex
		pending = map[uint64]chan struct{}{}
		wmu     sync.Mutex
		nextID  atomic.Uint64
	)
	go func() {
		r := bufio.NewReaderSize(c, 64<<10)
		hdr := make([]byte, 16)
		body := make([]byte, 0, size)
		for {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(hdr[12:]))
			if cap(body) < n {
				body = make([]byte, n)
			}
			if _, err := io.ReadFull(r, body[:n]); err != nil {
				return
			}
			id := binary.BigEndian.Uint64(hdr[4:])
			mu.Lock()
			ch := pending[id]
			delete(pending, id)
			mu.Unlock()
			if ch != nil {
				ch <- struct{}{}
			}
		}
	}()
	var measuring atomic.Bool
	stop := make(chan struct{})
	lat := make([][]time.Duration, conc)
	var calls atomic.Uint64
	var wg sync.WaitGroup
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame := make([]byte, 16+size)
			binary.BigEndian.PutUint16(frame, 0xdabb)
			frame[2] = 0xc2
			binary.BigEndian.PutUint32(frame[12:], uint32(size))
			done := make(chan struct{}, 1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := nextID.Add(1)
				binary.BigEndian.PutUint64(frame[4:], id)
				mu.Lock()
				pending[id] = done
				mu.Unlock()
				start := time.Now()
				wmu.Lock()
				_, err := c.Write(frame)
				wmu.Unlock()
				if err != nil {
					return
				}
				<-done
				if measuring.Load() {
					lat[i] = append(lat[i], time.Since(start))
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
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(int(p*float64(len(all))), len(all)-1)]) / 1e6
	}
	out, _ := json.Marshal(map[string]any{
		"system": "rawtcp", "concurrency": conc, "size": size, "seconds": elapsed.Seconds(),
		"calls": calls.Load(), "errors": 0, "qps": float64(calls.Load()) / elapsed.Seconds(),
		"p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99), "p999_ms": pct(0.999),
	})
	fmt.Println(string(out))
	return nil
}
