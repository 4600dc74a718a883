//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package route

import (
	"net"
	"syscall"
)

// peeker checks a socket, without blocking or consuming anything, for
// bytes waiting to be read or a peer close: an idle pooled connection in
// either state must not carry another request. Its raw connection and
// callback are set up once per socket, so a check allocates nothing.
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	ready bool
	buf   [1]byte
}

// reset points the peeker at socket c.
func (p *peeker) reset(c net.Conn) {
	p.rc = nil
	if sc, ok := c.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	if p.fn == nil {
		p.fn = p.peek
	}
}

func (p *peeker) peek(fd uintptr) bool {
	n, err := peekFD(fd, p.buf[:])
	// n > 0: unread bytes; n == 0 without error: the peer closed.
	p.ready = n > 0 || (n == 0 && err == nil)
	return true
}

// wroteOrClosed reports whether the socket has unread bytes or its peer
// closed it.
func (p *peeker) wroteOrClosed() bool {
	if p.rc == nil {
		return false
	}
	p.ready = false
	_ = p.rc.Read(p.fn)
	return p.ready
}
