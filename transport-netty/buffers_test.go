package netty

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBufferClasses(t *testing.T) {
	// Four classes per power of two: a buffer is at most a quarter larger
	// than what it was taken for.
	for _, c := range []struct{ n, want int }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 5 << 10}, {7 << 10, 7 << 10},
		{7<<10 + 1, 8 << 10}, {8<<10 + 1, 10 << 10}, {64 << 10, 64 << 10}, {256<<10 + 171, 320 << 10},
		{1<<20 + 7, 1<<20 + 256<<10}, {16 << 20, 16 << 20},
	} {
		if got := readBufCap(c.n); got != c.want {
			t.Errorf("readBufCap(%d) = %d, want %d", c.n, got, c.want)
		}
		bp := getReadBuf(c.n)
		if len(*bp) != c.n || cap(*bp) != c.want {
			t.Errorf("getReadBuf(%d): len %d cap %d, want cap %d", c.n, len(*bp), cap(*bp), c.want)
		}
		putReadBuf(bp)
	}
	for i := range bufClasses {
		if c := classSize(i); classAtLeast(c) != i || classAtMost(c) != i || classAtMost(c+1) != i || (i > 0 && classAtMost(c-1) != i-1) {
			t.Errorf("class %d (%d bytes): at least %d, at most %d", i, c, classAtLeast(c), classAtMost(c))
		}
	}
	// Past the largest class: made to measure, never pooled.
	if n := 16<<20 + 1; readBufCap(n) != n || cap(*getReadBuf(n)) != n {
		t.Errorf("a read buffer of 16 MiB + 1 is not made to measure")
	}
	// An encode buffer that grew goes to the class it fills, and serves
	// only hints it can hold.
	b := make([]byte, 0, 3<<20+5)
	putEncodeBuf(&b)
	for range 4 {
		if bp := getEncodeBuf(3 << 20); cap(*bp) < 3<<20 && cap(*bp) != 4<<10 {
			t.Fatalf("getEncodeBuf(3 MiB) gave %d bytes", cap(*bp))
		}
	}
}

// An encode buffer for a large hint is one the pool has, never one made
// for the hint: a hundred senders right after one 16 MiB frame do not
// make a hundred 16 MiB buffers.
func TestEncodeBufNeverMadeForHint(t *testing.T) {
	large := 0
	for range 100 {
		bp := getEncodeBuf(16 << 20) // kept, not given back
		if cap(*bp) > 4<<10 {
			large++
		}
	}
	if large > 2 { // at most what another test of this package pooled
		t.Fatalf("%d of 100 encode buffers for a 16 MiB hint were large: made for the hint", large)
	}
	b := make([]byte, 0, 16<<20)
	putEncodeBuf(&b)
	if bp := getEncodeBuf(16 << 20); cap(*bp) != 16<<20 && cap(*bp) != 4<<10 {
		t.Fatalf("getEncodeBuf gave %d bytes: neither the pooled buffer nor the smallest class", cap(*bp))
	}
}

// Frames of many sizes, larger and smaller than the read buffer, from
// many callers at once: every answer is its call's, byte for byte, while
// the read and encode buffers are taken from and given back to the pools.
func TestLargeFramesOfMixedSizes(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	sizes := []int{100, 5 << 10, 64 << 10, 64<<10 + 1, 70 << 10, 300 << 10, 1<<20 + 3, 5 << 10, 2<<20 + 512<<10}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 2 * len(sizes) {
				n := sizes[(g+j)%len(sizes)]
				want := fmt.Sprintf("%d/%d:", g, j) + strings.Repeat(string(rune('a'+(g*7+j)%26)), n)
				resp, err := c.Request(context.Background(), want, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if got, _ := resp.Data.(string); got != want {
					errs <- fmt.Errorf("call %d/%d of %d bytes: got %d bytes back, not its own", g, j, len(want), len(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkLargeRoundTrip is a 256 KiB echo on one connection: with the
// pools, no encode or read buffer of its size is garbage per call.
func BenchmarkLargeRoundTrip(b *testing.B) {
	t := &testing.T{}
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	defer c.Close()
	defer es.Close(time.Second)
	msg := strings.Repeat("z", 256<<10)
	b.ReportAllocs()
	b.SetBytes(2 * 256 << 10)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Request(context.Background(), msg, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
