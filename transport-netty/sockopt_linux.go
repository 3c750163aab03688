package netty

import (
	"net"
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT (linux/tcp.h), which the syscall
// package does not name.
const tcpUserTimeout = 0x12

// setUserTimeout bounds, in the kernel, how long bytes already handed to a
// server connection's socket may stay unacknowledged or unsent for a zero
// window: past peerTimeout the kernel ends the connection (grpc-go sets the
// same option from its keepalive timeout). The write queue's own bounds
// (WriteStall) cannot see bytes the socket has taken: a peer that stops
// reading, or whose machine is gone, would otherwise hold them, and the
// connection, until the idle rule or TCP's retries give up (minutes).
func setUserTimeout(nc net.Conn) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(peerTimeout/time.Millisecond))
	})
}
