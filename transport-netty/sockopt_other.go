//go:build !linux

package netty

import "net"

// setUserTimeout: TCP_USER_TIMEOUT is Linux's; elsewhere the write queue's
// own bounds and the idle rule apply.
func setUserTimeout(net.Conn) {}
