package main

import (
	"runtime"
	"syscall"
	"unsafe"
)

// Every socket is registered once, edge-triggered, for input, output and
// the peer's half-close, as nginx's epoll module does: no epoll_ctl per
// request, and a blocked write needs no re-registration. An edge is
// remembered in conn.readable / conn.writable until a read or write finds
// the socket drained or full; a read that fills less than the buffer
// drained it (so no read is spent on EAGAIN).
const connEvents = syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | (-syscall.EPOLLET & 0xffffffff)

// maxPending is how much response the loop holds for a slow client
// before it stops reading the upstream (back-pressure).
const maxPending = 64 << 10

// conn is one socket, client or upstream side.
type conn struct {
	fd       int
	upstream bool
	closed   bool
	readable bool   // an input edge not yet drained
	writable bool   // output space not yet found full
	in       []byte // bytes read, not yet used
	out      []byte // bytes to write to this socket that did not fit
	peer     *conn  // the other side of the exchange in flight

	// client side
	waiting    bool // an exchange is in flight (request sent, response not complete)
	closeAfter bool // the request asked Connection: close

	// upstream side
	be         int  // backend index
	connecting bool // non-blocking connect not yet complete
	idle       bool // in the loop's idle pool
	remain     int  // response bytes still to relay; -1: head not yet complete
	sent       int  // response bytes relayed to the client
	reusable   bool // the response allows keep-alive and had no stray bytes
}

// loop is one event loop: its epoll set, listener, connections by file
// descriptor, and idle upstream connections per backend.
type loop struct {
	epfd, lfd int
	poll0     bool
	rawWait   bool
	check     bool // peek an idle upstream socket before reusing it
	conns     []*conn
	idle      [][]*conn
	bes       []*backend
	rr        int
	events    []syscall.EpollEvent
}

func newLoop(addr *syscall.SockaddrInet4, bes []*backend, poll0, rawWait, check bool) (*loop, error) {
	l := &loop{bes: bes, poll0: poll0, rawWait: rawWait, check: check, idle: make([][]*conn, len(bes)), events: make([]syscall.EpollEvent, 256)}
	var err error
	if l.lfd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0); err != nil {
		return nil, err
	}
	_ = syscall.SetsockoptInt(l.lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err = syscall.SetsockoptInt(l.lfd, syscall.SOL_SOCKET, soReusePort, 1); err != nil {
		return nil, err
	}
	if err = syscall.Bind(l.lfd, addr); err != nil {
		return nil, err
	}
	if err = syscall.Listen(l.lfd, 4096); err != nil {
		return nil, err
	}
	if l.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return nil, err
	}
	// the listener level-triggered: accept runs until EAGAIN anyway
	if err = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, l.lfd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.lfd)}); err != nil {
		return nil, err
	}
	return l, nil
}

// run serves until an epoll error, on the calling goroutine locked to its
// OS thread.
func (l *loop) run() error {
	runtime.LockOSThread()
	for {
		n := 0
		if l.poll0 {
			// a raw non-blocking wait first: when events are ready the
			// thread never leaves its P
			r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
			if e == 0 {
				n = int(r)
			}
		}
		if n == 0 && l.rawWait {
			// The blocking wait without the scheduler: the P stays with this
			// thread, so sysmon never retakes it and no other M is woken to
			// run it. A stop-the-world is not kept waiting: its preemption
			// signal ends the wait (EINTR), and so does the 10 ms timeout,
			// after which the goroutine yields at a safe point.
			r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 10, 0, 0)
			if e != 0 || r == 0 {
				runtime.Gosched()
				continue
			}
			n = int(r)
		}
		if n == 0 {
			// The blocking wait goes through the scheduler (entersyscall), so
			// a stop-the-world never waits on a loop parked in the kernel.
			var err error
			n, err = syscall.EpollWait(l.epfd, l.events, -1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
		}
		for _, ev := range l.events[:n] {
			fd := int(ev.Fd)
			if fd == l.lfd {
				l.accept()
				continue
			}
			if fd >= len(l.conns) || l.conns[fd] == nil {
				continue
			}
			c := l.conns[fd]
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
				c.readable = true
			}
			if ev.Events&(syscall.EPOLLOUT|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
				c.writable = true
			}
			if c.upstream {
				l.upEvent(c)
			} else {
				l.clientEvent(c, ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0)
			}
		}
	}
}

func (l *loop) add(c *conn) bool {
	if syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, &syscall.EpollEvent{Events: uint32(connEvents), Fd: int32(c.fd)}) != nil {
		_ = syscall.Close(c.fd)
		return false
	}
	for c.fd >= len(l.conns) {
		l.conns = append(l.conns, make([]*conn, len(l.conns)+64)...)
	}
	l.conns[c.fd] = c
	return true
}

func (l *loop) close(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	l.conns[c.fd] = nil
	_ = syscall.Close(c.fd) // also leaves the epoll set
}

func (l *loop) accept() {
	for {
		fd, _, err := syscall.Accept4(l.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left; others: retried at the next event
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		l.add(&conn{fd: fd, in: make([]byte, 0, 4096), writable: true})
	}
}

// read reads into c.in's spare capacity. It returns false on EOF or an
// error (the caller closes), true otherwise; c.readable is cleared when
// the socket was found drained.
func (l *loop) read(c *conn) (ok bool) {
	space := c.in[len(c.in):cap(c.in)]
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&space[0])), uintptr(len(space)))
	switch {
	case e == syscall.EAGAIN:
		c.readable = false
		return true
	case e == syscall.EINTR:
		return true
	case e != 0 || r == 0:
		return false
	}
	if int(r) < len(space) {
		c.readable = false
	}
	c.in = c.in[:len(c.in)+int(r)]
	return true
}

// write writes b to c, or appends it to c.out behind bytes already waiting;
// what does not fit waits in c.out for an output edge. It returns false on
// an error (the caller closes).
func (l *loop) write(c *conn, b []byte) bool {
	if len(c.out) > 0 || !c.writable || c.connecting {
		c.out = append(c.out, b...)
		return true
	}
	for len(b) > 0 {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			c.writable = false
			c.out = append(c.out, b...)
			return true
		case e != 0:
			return false
		}
		b = b[r:]
	}
	return true
}

// flush writes what waits in c.out; false on an error.
func (l *loop) flush(c *conn) bool {
	for len(c.out) > 0 {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&c.out[0])), uintptr(len(c.out)))
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			c.writable = false
			return true
		case e != 0:
			return false
		}
		c.out = c.out[:copy(c.out, c.out[r:])]
	}
	return true
}

// soReusePort is SO_REUSEPORT (Linux), which package syscall does not name.
const soReusePort = 0xf
