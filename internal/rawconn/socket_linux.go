//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Socket reads and writes a TCP socket with raw system calls instead of
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
type Socket struct {
	c             net.Conn
	rc            syscall.RawConn
	rfn, wfn, xfn func(fd uintptr) bool
	lfn           func(fd uintptr) bool
	lender        Lender // ReadLent's, during the call
	rbuf          []byte
	rn            int
	rerr          syscall.Errno
	wbuf          []byte
	wn            int
	werr          syscall.Errno
	xstage        exchangeStage // Exchange's progress
}

// Reset points s at c; it reports false when c has no file descriptor
// (say, a TLS connection or a test's net.Pipe): s then reads and writes
// through c's own Read and Write.
func (s *Socket) Reset(c net.Conn) bool {
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
		s.rfn, s.wfn, s.xfn, s.lfn = s.readFD, s.writeFD, s.exchangeFD, s.lentFD
	}
	return true
}

// OK reports whether s uses raw system calls.
func (s *Socket) OK() bool { return s.rc != nil }

func (s *Socket) readFD(fd uintptr) bool {
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

func (s *Socket) writeFD(fd uintptr) bool {
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

// exchangeStage is how far an Exchange got.
type exchangeStage uint8

const (
	xCheck exchangeStage = iota // checking the socket for stray bytes or a close
	xStray                      // it had some: nothing was sent
	xSend                       // writing the request
	xAwait                      // the request is written: reading the answer
)

// Exchange writes req and reads the first bytes of the answer into p, in
// one RawConn.Read, so that the read waits on the poller first instead of
// trying read(2) on a socket that cannot have the answer yet (an EAGAIN
// read per request saved). With check, it first makes sure the socket
// holds nothing from an earlier exchange and that its peer did not close
// it: a read(2) that must say EAGAIN (route's upstream guard relies on
// it). Its results, as Read's, are net.Conn's.
//
// Waiting before reading is safe only because of the order: RawConn.Read
// clears the socket's readiness before it calls exchangeFD, and the
// poller is edge-triggered, so a wait returns only for bytes that arrive
// after that. The answer cannot arrive before its request is written,
// and exchangeFD writes it after the clear; bytes from before it are what
// the check reads. A write the socket cannot take whole at once is
// finished outside (with a wait for writability and the write deadline),
// and the answer then read as Read does.
func (s *Socket) Exchange(req, p []byte, check bool) (int, ExchangeResult, error) {
	s.rbuf, s.rn, s.rerr = p, 0, 0
	s.wbuf, s.wn, s.werr = req, 0, 0
	s.xstage = xSend
	if check {
		s.xstage = xCheck
	}
	err := s.rc.Read(s.xfn)
	stage, wn, werr, n, rerr := s.xstage, s.wn, s.werr, s.rn, s.rerr
	s.rbuf, s.wbuf = nil, nil
	switch {
	case stage == xStray:
		return 0, Unusable, nil
	case stage < xAwait && err != nil:
		// A deadline or Close before the request was written whole.
		return 0, NotSent, opError(err, "write")
	case stage < xAwait && werr != 0:
		return 0, NotSent, s.errnoError("write", werr)
	case stage < xAwait:
		// The socket buffer took only part of it.
		if _, err := s.Write(req[wn:]); err != nil {
			return 0, NotSent, err
		}
		n, err := s.Read(p)
		return n, Exchanged, err
	case err != nil:
		return 0, Exchanged, opError(err, "read")
	case rerr != 0:
		return 0, Exchanged, s.errnoError("read", rerr)
	case n == 0:
		return 0, Exchanged, io.EOF
	}
	return n, Exchanged, nil
}

// exchangeFD is Exchange's RawConn.Read callback: the check, the write,
// then the reads of the answer.
func (s *Socket) exchangeFD(fd uintptr) bool {
	if s.xstage == xCheck {
		for {
			_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rbuf[0])), uintptr(len(s.rbuf)))
			if e == syscall.EINTR {
				continue
			}
			// Success means bytes, or 0 for a peer close: the socket is
			// not to carry another request. An error other than EAGAIN
			// (a reset) leaves the verdict to the write, as a peek does.
			if e == 0 {
				s.xstage = xStray
				return true
			}
			break
		}
		s.xstage = xSend
	}
	if s.xstage == xSend {
		if !s.writeFD(fd) || s.werr != 0 {
			return true // EAGAIN partway or an error: Exchange goes on outside
		}
		s.xstage = xAwait
		return false // wait for the answer: it cannot have arrived before the write
	}
	return s.readFD(fd)
}

// Read is net.Conn.Read with a raw read(2), same results: io.EOF when the
// peer closed, a *net.OpError "read" otherwise (timeouts included).
func (s *Socket) Read(p []byte) (int, error) {
	if s.rc == nil {
		return s.c.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.rfn)
	s.rbuf = nil
	return s.readResult(err)
}

// readResult is what Read and ReadLent return once the socket's
// RawConn.Read returned err and a read callback left s.rn and s.rerr.
func (s *Socket) readResult(err error) (int, error) {
	n, e := s.rn, s.rerr
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

// ReadLent is Read into a buffer that l lends only once the socket has
// something to say: bytes, its peer's close, or an error. While it waits
// for the socket (and its deadline), no buffer is held: each read(2) that
// finds nothing (EAGAIN) hands the buffer back (Lender.Unlend) before the
// goroutine parks. A socket that is already readable costs one read(2),
// as Read. Its results are Read's; when it returns with n == 0 the
// buffer was lent (the caller may keep or return it).
func (s *Socket) ReadLent(l Lender) (int, error) {
	if s.rc == nil {
		return s.c.Read(l.Lend())
	}
	s.lender, s.rn, s.rerr = l, 0, 0
	err := s.rc.Read(s.lfn)
	s.lender, s.rbuf = nil, nil
	return s.readResult(err)
}

// lentFD is ReadLent's RawConn.Read callback: a read(2) into the lent
// buffer, which goes back when the socket has nothing yet.
func (s *Socket) lentFD(fd uintptr) bool {
	s.rbuf = s.lender.Lend()
	if s.readFD(fd) {
		return true
	}
	s.rbuf = nil
	s.lender.Unlend()
	return false
}

// Write is net.Conn.Write with raw write(2) calls: all of p, or an error.
func (s *Socket) Write(p []byte) (int, error) {
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
		return n, opError(err, "write")
	case e != 0:
		return n, s.errnoError("write", e)
	}
	return n, nil
}

// errnoError is net's error for a read(2) or write(2) (op) that failed
// with e on this socket.
func (s *Socket) errnoError(op string, e syscall.Errno) error {
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
