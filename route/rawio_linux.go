//go:build linux

package route

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a TCP socket with raw system calls instead of
// the net package's. The socket is non-blocking (the net package set it
// so), so a read or write never sleeps in the kernel: when it would block
// it returns EAGAIN and the goroutine parks on the runtime's poller as
// net.Conn's own Read and Write do (through syscall.RawConn, which also
// honours the connection's deadlines and its Close).
//
// What it saves is the scheduler's system-call bookkeeping around each
// call. A plain Read or Write enters the runtime's "in a system call"
// state; a loopback write that wakes the peer often stays in the kernel
// for longer than sysmon's 20 µs tick, and then sysmon takes the
// processor (P) away and hands it to another thread, which must be woken,
// and the writer must get a P back (a futex round trip) when the call
// returns. Under wrk this hand-off, sysmon's own 20 µs polling and the
// thread wake-ups it causes cost more CPU per request than the proxy's
// code. A raw call keeps its P.
//
// Callers hold the connection's direction (one reader, one writer at a
// time), as net.Conn users do; the fields below are per direction.
type rawSocket struct {
	c        net.Conn
	rc       syscall.RawConn
	rfn, wfn func(fd uintptr) bool
	rbuf     []byte
	rn       int
	rerr     syscall.Errno
	wbuf     []byte
	wn       int
	werr     syscall.Errno
}

// reset points s at c; it reports false when c has no file descriptor
// (say, a TLS connection or a test's net.Pipe): s then reads and writes
// through c's own Read and Write.
func (s *rawSocket) reset(c net.Conn) bool {
	s.c, s.rc = c, nil
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	s.rc = rc
	if s.rfn == nil {
		// Method values made once, so that a read or write allocates
		// nothing.
		s.rfn, s.wfn = s.readFD, s.writeFD
	}
	return true
}

// ok reports whether s uses raw system calls.
func (s *rawSocket) ok() bool { return s.rc != nil }

func (s *rawSocket) readFD(fd uintptr) bool {
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

func (s *rawSocket) writeFD(fd uintptr) bool {
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

// read is net.Conn.Read with a raw read(2), same results: io.EOF when the
// peer closed, a *net.OpError "read" otherwise (timeouts included).
func (s *rawSocket) read(p []byte) (int, error) {
	if s.rc == nil {
		return s.c.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.rfn)
	n, e := s.rn, s.rerr
	s.rbuf = nil
	switch {
	case err != nil:
		return 0, rawOpError(err, "read")
	case e != 0:
		return 0, s.errnoError("read", e)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// write is net.Conn.Write with raw write(2) calls: all of p, or an error.
func (s *rawSocket) write(p []byte) (int, error) {
	if s.rc == nil {
		return s.c.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.wbuf, s.wn, s.werr = p, 0, 0
	err := s.rc.Write(s.wfn)
	n, e := s.wn, s.werr
	s.wbuf = nil
	switch {
	case err != nil:
		return n, rawOpError(err, "write")
	case e != 0:
		return n, s.errnoError("write", e)
	}
	return n, nil
}

// errnoError is net's error for a read(2) or write(2) (op) that failed
// with e on this socket.
func (s *rawSocket) errnoError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.c.LocalAddr(), Addr: s.c.RemoteAddr(), Err: os.NewSyscallError(op, e)}
}

// rawOpError names a RawConn failure (a deadline, a closed connection) as
// the plain call would: Op "read" or "write", not "raw-read".
func rawOpError(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}
