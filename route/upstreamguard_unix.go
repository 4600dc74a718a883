//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package route

import (
	"net"
	"syscall"
)

// peerWroteOrClosed reports, without blocking or consuming anything,
// whether c has bytes waiting to be read or its peer closed it: an idle
// pooled connection in either state must not carry another request.
func peerWroteOrClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	ready := false
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// n > 0: unread bytes; n == 0 without error: the peer closed.
		ready = n > 0 || (n == 0 && err == nil)
		return true
	})
	return ready
}
