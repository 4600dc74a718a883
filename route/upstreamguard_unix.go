//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package route

import (
	"bytes"
	"net"
	"syscall"
)

// peeker checks a socket, without blocking or consuming anything, for
// bytes waiting to be read or a peer close: an idle pooled connection in
// either state must not carry another request. Its raw connection and
// callback are set up once per socket, so a check allocates nothing.
//
// Its peeks go through RawConn.Control, not RawConn.Read: Read refuses to
// call its function once the socket's read deadline has passed, and the
// deadline the last exchange armed (upstream.first_byte_timeout or
// idle_timeout after its last read) passes while the connection idles in
// the pool whenever that timeout is below upstream.idle_conn_ttl. The
// check before a reuse then saw nothing, and the next client got the
// stray bytes as its answer.
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr)
	ready bool
	buf   [1]byte

	// tryWrite's call, through rc.Write without waiting on the poller.
	wfn  func(fd uintptr) bool
	wbuf []byte
	wn   int

	// answered's peek of the start of what the backend wrote.
	afn  func(fd uintptr)
	abuf [12]byte
	an   int
}

// reset points the peeker at socket c.
func (p *peeker) reset(c net.Conn) {
	p.rc = nil
	if sc, ok := c.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	if p.fn == nil {
		p.fn, p.wfn, p.afn = p.peek, p.write, p.peekStart
	}
}

// answered reports whether the backend has closed the socket or written
// something other than the start of an interim (1xx) head: a final
// answer, or bytes that are no answer at all. An interim head (a 100
// Continue nobody asked for: the proxy strips Expect) is left to the
// reader, which skips it, and is no reason to stop sending the request.
func (p *peeker) answered() bool {
	p.an = -1
	_ = p.rc.Control(p.afn)
	switch {
	case p.an == 0:
		return true // closed
	case p.an < 0:
		return false // nothing yet
	}
	b := p.abuf[:p.an]
	if len(b) < len(p.abuf) {
		// Too short to tell: an interim head may still be arriving.
		return !bytes.HasPrefix([]byte("HTTP/1.1 1"), b[:min(len(b), 10)]) && !bytes.HasPrefix([]byte("HTTP/1.0 1"), b[:min(len(b), 10)])
	}
	return !isInformational(b)
}

func (p *peeker) peekStart(fd uintptr) {
	n, err := peekFD(fd, p.abuf[:])
	switch {
	case n > 0:
		p.an = n
	case n == 0 && err == nil:
		p.an = 0
	}
}

// ok reports whether the peeker has a socket to look at.
func (p *peeker) ok() bool { return p.rc != nil }

// tryWrite writes what of b the socket takes now, without waiting for it,
// and reports how much and whether that was all of b. Any error (the
// socket's full buffer, a reset) leaves the rest to the caller's write,
// which waits for the socket or reports the error.
func (p *peeker) tryWrite(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, true
	}
	p.wbuf, p.wn = b, 0
	_ = p.rc.Write(p.wfn)
	n := p.wn
	p.wbuf = nil
	return n, n == len(b)
}

func (p *peeker) write(fd uintptr) bool {
	for p.wn < len(p.wbuf) {
		n, err := writeFD(fd, p.wbuf[p.wn:])
		if err != nil || n <= 0 {
			break
		}
		p.wn += n
	}
	return true // never wait on the poller
}

func (p *peeker) peek(fd uintptr) {
	n, err := peekFD(fd, p.buf[:])
	// n > 0: unread bytes; n == 0 without error: the peer closed.
	p.ready = n > 0 || (n == 0 && err == nil)
}

// wroteOrClosed reports whether the socket has unread bytes or its peer
// closed it.
func (p *peeker) wroteOrClosed() bool {
	if p.rc == nil {
		return false
	}
	p.ready = false
	_ = p.rc.Control(p.fn)
	return p.ready
}
