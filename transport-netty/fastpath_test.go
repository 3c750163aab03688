//go:build !race

package netty

import (
	"io"
	"strings"
	"testing"
)

// The server's checks for room cost its fast path nothing: a Send that
// finds room (a peer that reads) allocates nothing, as on a client. Not
// under the race detector: its sync.Pool drops some of what is put back,
// so the encoding buffers would be allocated again now and then.
func TestServerSendFastPathAllocatesNothing(t *testing.T) {
	c, peer := serverPipe(t)
	go io.Copy(io.Discard, peer)
	// 200 frames of half a KiB: less than the sockets' buffers hold, so
	// that every one finds the socket free however late the reader runs
	// (AllocsPerRun runs on one thread).
	msg := &Request{ID: 1, Data: strings.Repeat("a", 512)}
	if n := testing.AllocsPerRun(200, func() {
		if err := c.Send(msg); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per Send", n)
	}
}
