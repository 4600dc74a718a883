//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Conn is a TCP connection read and written with raw system calls. It is
// a net.Conn with the net package's results: io.EOF when the peer closed,
// a *net.OpError with Op "read" or "write" otherwise (deadlines and Close
// included). As with any net.Conn, one Read and one Write may run at the
// same time; the fields below are per direction.
type Conn struct {
	c        *net.TCPConn
	rc       syscall.RawConn
	rfn, wfn func(fd uintptr) bool // method values made once: no allocation per call

	rbuf []byte // read direction
	rn   int
	rerr syscall.Errno

	wbuf []byte // write direction
	wn   int
	werr syscall.Errno
}

// Wrap returns c as a *Conn when it is a *net.TCPConn, else c itself
// (a TLS connection, a pipe: they keep their own Read and Write).
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &Conn{c: tc, rc: rc}
	r.rfn, r.wfn = r.readFD, r.writeFD
	return r
}

func (s *Conn) readFD(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rbuf[0])), uintptr(len(s.rbuf)))
		switch e {
		case 0:
			s.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // park until readable (or the deadline)
		default:
			s.rerr = e
			return true
		}
	}
}

func (s *Conn) writeFD(fd uintptr) bool {
	for s.wn < len(s.wbuf) {
		rest := s.wbuf[s.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			s.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // park until writable (or the deadline)
		default:
			s.werr = e
			return true
		}
	}
	return true
}

// Read implements net.Conn with one raw read(2) (and waits on the poller
// while there is nothing to read).
func (s *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.rfn)
	n, e := s.rn, s.rerr
	s.rbuf = nil
	switch {
	case err != nil:
		return 0, opError(err, "read")
	case e != 0:
		return 0, s.errnoError("read", e)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write implements net.Conn with raw write(2) calls: all of p, or an
// error.
func (s *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wbuf, s.wn, s.werr = p, 0, 0
	err := s.rc.Write(s.wfn)
	n, e := s.wn, s.werr
	s.wbuf = nil
	switch {
	case err != nil:
		return n, opError(err, "write")
	case e != 0:
		return n, s.errnoError("write", e)
	}
	return n, nil
}

// Close implements net.Conn.
func (s *Conn) Close() error { return s.c.Close() }

// LocalAddr implements net.Conn.
func (s *Conn) LocalAddr() net.Addr { return s.c.LocalAddr() }

// RemoteAddr implements net.Conn.
func (s *Conn) RemoteAddr() net.Addr { return s.c.RemoteAddr() }

// SetDeadline implements net.Conn; Read and Write honour it.
func (s *Conn) SetDeadline(t time.Time) error { return s.c.SetDeadline(t) }

// SetReadDeadline implements net.Conn; Read honours it.
func (s *Conn) SetReadDeadline(t time.Time) error { return s.c.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn; Write honours it.
func (s *Conn) SetWriteDeadline(t time.Time) error { return s.c.SetWriteDeadline(t) }

// errnoError is net's error for a read(2) or write(2) (op) that failed
// with e.
func (s *Conn) errnoError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.c.LocalAddr(), Addr: s.c.RemoteAddr(), Err: os.NewSyscallError(op, e)}
}

// opError names a RawConn failure (a deadline, a closed connection) as
// the plain call would: Op "read" or "write", not "raw-read".
func opError(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}
