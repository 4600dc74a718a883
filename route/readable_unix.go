//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package route

import (
	"net"
	"syscall"
	"time"
)

// waitReadable blocks until c has bytes to read, its peer closed it, or d
// passed, holding no buffer (the check peeks one byte into a field); it
// reports whether bytes are waiting. A connection without a file
// descriptor reports true at once: its reader waits instead.
func waitReadable(c net.Conn, d time.Duration) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil || c.SetReadDeadline(time.Now().Add(d)) != nil {
		return false
	}
	var w readyCheck
	err = rc.Read(w.check)
	if c.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	return err == nil && w.ready
}

// readyCheck is a syscall.RawConn read callback: done once the socket has
// a byte to read (ready) or its peer closed it or failed (not ready).
type readyCheck struct {
	ready bool
	buf   [1]byte
}

func (w *readyCheck) check(fd uintptr) bool {
	n, err := peekFD(fd, w.buf[:])
	if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK {
		return false // nothing yet: wait for readability
	}
	w.ready = n > 0 || err == syscall.EINTR
	return true
}
