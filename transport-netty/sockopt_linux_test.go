package netty

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// A server's sockets carry TCP_USER_TIMEOUT: bytes the kernel holds for a
// peer that never takes them end the connection after peerTimeout.
func TestServerSocketsHaveUserTimeout(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	nc, err := net.Dial("tcp", es.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := serverConnOf(t, es)
	rc, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout) })
	if gerr != nil || time.Duration(v)*time.Millisecond != peerTimeout {
		t.Fatalf("TCP_USER_TIMEOUT %d ms (%v), want %v", v, gerr, peerTimeout)
	}
}
