//go:build linux

package evloop

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every socket is registered once, edge-triggered, for input, output and
// the peer's half-close (nginx's scheme): no epoll_ctl per request, and a
// blocked write needs no re-registration. An edge is remembered in
// conn.readable / conn.writable until a read comes back shorter than its
// buffer or a write meets EAGAIN, so no read is spent on EAGAIN.
const connEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

const (
	// timerTick is the wheel's resolution and the longest epoll_wait:
	// deadlines fire up to one tick late.
	timerTick = 10 * time.Millisecond
	// wheelSlots spans 40.96 s per turn; longer deadlines are re-queued
	// when their slot comes up.
	wheelSlots = 4096
	// maxPending is how much response a loop queues for a slow client
	// before it stops reading the upstream (back-pressure).
	maxPending = 64 << 10
	// inBuf is a connection's initial input buffer; a buffer grown past
	// keepBuf for a large request is dropped when the request is done.
	inBuf   = 4 << 10
	keepBuf = 64 << 10
	// maxAttempts bounds the retries Handler.Done may ask for.
	maxAttempts = 8
	// acceptPause is how long a loop stops accepting after accept4 found
	// no descriptor (or memory) for a connection.
	acceptPause = 100 * time.Millisecond
)

// Server is a set of event loops serving one address. Start it with New;
// Close stops it. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	loops    []*loop
	addr     net.Addr
	wg       sync.WaitGroup
	once     sync.Once
	draining atomic.Bool
}

// New validates cfg, opens every loop's listener and starts the loops.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		start := time.Now()
		cfg.Clock = func() int64 { return int64(time.Since(start)) + 1 }
	}
	ap, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil {
		ta, rerr := net.ResolveTCPAddr("tcp", cfg.Addr)
		if rerr != nil {
			return nil, fmt.Errorf("evloop: Config.Addr %q: %w", cfg.Addr, rerr)
		}
		ap = ta.AddrPort()
	}
	s := &Server{cfg: cfg}
	raw := runtime.GOMAXPROCS(0) > cfg.Loops
	for i := range cfg.Loops {
		l, err := newLoop(s, ap, raw)
		if err != nil {
			s.closeLoops()
			return nil, err
		}
		l.idx = int32(i)
		if ap.Port() == 0 {
			sa, err := unix.Getsockname(l.lfd)
			if err != nil {
				l.closeAll()
				s.closeLoops()
				return nil, err
			}
			ap = netip.AddrPortFrom(ap.Addr(), uint16(portOf(sa)))
		}
		s.loops = append(s.loops, l)
	}
	s.addr = net.TCPAddrFromAddrPort(ap)
	for _, l := range s.loops {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.run()
		}()
	}
	return s, nil
}

func (s *Server) closeLoops() {
	for _, l := range s.loops {
		l.closeAll()
	}
}

// Addr returns the address the loops listen on.
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops the loops gracefully. Each loop accepts what waits in
// its listener's backlog and closes the listener (new connections are
// refused by the kernel), closes its idle keep-alive client connections,
// and lets every request already started (being read, at an upstream, or
// parked) finish as usual, Done included; their responses say
// "Connection: close" and each connection closes after its response.
// Shutdown returns nil once no loop has a client connection left, after
// closing the loops as Close does. When ctx is done first, it calls Close
// (what remains is cut, without Done) and returns ctx.Err(). Connections
// handed over are the fallback's to drain.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	for _, l := range s.loops {
		l.wake()
	}
	for _, l := range s.loops {
		select {
		case <-l.drained:
		case <-ctx.Done():
			_ = s.Close()
			return ctx.Err()
		}
	}
	return s.Close()
}

// Resume delivers the decision for the parked request t names: its loop
// calls Resumer.Resumed for it. It may be called from any goroutine; it
// does not block beyond a short critical section and one eventfd write
// (none when the loop has resumes queued already), and allocates nothing
// in steady state. It returns false when t names no loop of s or the
// loop has stopped; true means only that the ticket was queued: a ticket
// whose park has ended (resumed already, expired, client gone) is
// dropped by the loop.
func (s *Server) Resume(t Ticket) bool {
	if t.gen == 0 || t.loop < 0 || int(t.loop) >= len(s.loops) {
		return false
	}
	return s.loops[t.loop].enqueue(t)
}

// Close stops every loop: listeners, client and upstream connections the
// loops own are closed (exchanges in flight are cut); connections already
// handed over stay with the fallback. It returns when the loops have ended.
func (s *Server) Close() error {
	s.once.Do(func() {
		for _, l := range s.loops {
			// The wake-up before the flag: the loop closes efd only after
			// it has seen the flag, so the write never meets a closed (or
			// reused) descriptor.
			one := [8]byte{1}
			_, _ = unix.Write(l.efd, one[:])
			l.stop.Store(true)
		}
	})
	s.wg.Wait()
	return nil
}

func portOf(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

func sockaddr(ap netip.AddrPort) (unix.Sockaddr, int) {
	if a := ap.Addr().Unmap(); a.Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, unix.AF_INET6
}

func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// conn is one socket of a loop, client or upstream side. It is owned by
// its loop's goroutine.
type conn struct {
	fd                 int
	gen                uint32 // matches the epoll event's tag, against fd reuse in one batch
	upstream           bool
	closed             bool
	readable, writable bool   // edges not yet used up
	in                 []byte // bytes read, not yet consumed
	out                []byte // bytes to write that did not fit yet
	tm                 timer
	peer               *conn // the other side of the exchange in flight

	// client side
	state      uint8
	closeAfter bool
	overCap    bool   // accepted past Config.MaxConns: being refused
	seq        uint32 // the latest ticket's sequence (Request.Ticket)
	parkSeq    uint32 // the ticket that resumes a park (state stPark)
	parkStatus int    // answered when the park expires
	req        Request
	dec        Decision
	retry      Decision
	res        Result

	// upstream side
	addr       netip.AddrPort
	connecting bool
	idle       bool
	reused     bool
	gotByte    bool
	reusable   bool
	remain     int // response body bytes still to relay; -1: head not yet parsed
}

func (c *conn) timerOf() *timer { return &c.tm }

// client states
const (
	stIdle   uint8 = iota // no byte of the next request yet (IdleTimeout)
	stRead                // a request partly read (ReadTimeout)
	stWait                // an exchange in flight (the upstream's timers)
	stLinger              // refused: draining input before the close
	stPark                // the decision deferred (Decision.Park): ParkTimeout
)

// loop is one event loop.
type loop struct {
	s    *Server
	cfg  *Config
	lim  limits
	epfd int
	lfd  int
	efd  int // eventfd: Close's wake-up
	raw  bool
	stop atomic.Bool
	// fdsClosed: lfd, efd and epfd are closed (they are never reassigned,
	// so Close may read efd from another goroutine).
	fdsClosed bool
	now       int64
	gen       uint32
	conns     []*conn // by file descriptor
	pools     map[netip.AddrPort][]*conn
	wheel     *wheel[*conn]
	events    []unix.EpollEvent
	out       []byte // scratch for upstream request heads and response heads
	expire    func(*conn)
	idx       int32 // the loop's index in Server.loops (tickets)
	// The Handler's optional interfaces (nil when not implemented).
	refusals RefusalHandler
	heads    HeadHandler
	resumer  Resumer
	rh       ResponseHead
	// Config.MaxConns: client connections counted toward it, those
	// accepted past it (being refused), and whether the listener left
	// the epoll set (paused) because the latter reached it too.
	nclients, nrefusing int
	paused              bool
	// acceptAt: the listener left the epoll set because accept4 ran out
	// of descriptors; it returns at this time (0: it is in the set, or
	// out for the cap above).
	acceptAt int64
	// Resumes from other goroutines: queue under qmu; the loop swaps it
	// with qspare. qclosed is set, under qmu, before efd is closed.
	qmu     sync.Mutex
	queue   []Ticket
	qspare  []Ticket
	qclosed bool
	// parked: a request parked in this turn of the loop (run yields).
	parked bool
	// Server.Shutdown: draining once the loop has closed its listener;
	// drained (never reassigned: Shutdown reads it) is closed when no
	// client connection is left, or at the loop's end.
	draining      bool
	drained       chan struct{}
	drainedClosed bool
}

func newLoop(s *Server, ap netip.AddrPort, raw bool) (*loop, error) {
	l := &loop{s: s, cfg: &s.cfg, raw: raw, epfd: -1, lfd: -1, efd: -1, drained: make(chan struct{}),
		pools: make(map[netip.AddrPort][]*conn), events: make([]unix.EpollEvent, 256)}
	l.lim = limits{head: s.cfg.MaxHeadBytes, headers: s.cfg.MaxHeaders, body: s.cfg.MaxBodyBytes}
	l.now = s.cfg.Clock()
	l.wheel = newWheel[*conn](int64(timerTick), wheelSlots, l.now)
	l.expire = l.onExpire
	l.refusals, _ = s.cfg.Handler.(RefusalHandler)
	l.heads, _ = s.cfg.Handler.(HeadHandler)
	l.resumer, _ = s.cfg.Handler.(Resumer)
	sa, family := sockaddr(ap)
	var err error
	fail := func(what string, e error) (*loop, error) {
		l.closeAll()
		return nil, fmt.Errorf("evloop: %s %s: %w", what, ap, e)
	}
	if l.lfd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return fail("socket", err)
	}
	_ = unix.SetsockoptInt(l.lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err = unix.SetsockoptInt(l.lfd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("SO_REUSEPORT", err)
	}
	if err = unix.Bind(l.lfd, sa); err != nil {
		return fail("bind", err)
	}
	if err = unix.Listen(l.lfd, 4096); err != nil {
		return fail("listen", err)
	}
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fail("epoll_create1", err)
	}
	if l.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fail("eventfd", err)
	}
	// The listener and the eventfd are level-triggered: accept runs until
	// EAGAIN anyway, and the eventfd is read once, at the stop.
	for _, fd := range []int{l.lfd, l.efd} {
		if err = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fail("epoll_ctl", err)
		}
	}
	return l, nil
}

// closeAll closes every descriptor the loop owns.
func (l *loop) closeAll() {
	for _, c := range l.conns {
		if c != nil {
			l.close(c)
		}
	}
	if l.fdsClosed {
		return
	}
	l.fdsClosed = true
	l.qmu.Lock()
	l.qclosed = true // no Resume writes efd from now on
	l.qmu.Unlock()
	for _, fd := range []int{l.lfd, l.efd, l.epfd} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}

// run serves until Close, on its goroutine locked to an OS thread.
func (l *loop) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.closeAll()
	defer func() {
		if !l.drainedClosed {
			close(l.drained)
		}
	}()
	for !l.stop.Load() {
		n := l.wait()
		l.now = l.cfg.Clock()
		for i := range n {
			ev := &l.events[i]
			fd := int(ev.Fd)
			switch {
			case fd == l.lfd:
				l.accept()
				continue
			case fd == l.efd:
				l.resumeQueued() // the stop flag is checked below
				continue
			case fd >= len(l.conns):
				continue
			}
			c := l.conns[fd]
			if c == nil || c.gen != uint32(ev.Pad) {
				continue // closed (and maybe reused) earlier in this batch
			}
			e := ev.Events
			if e&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.readable = true
			}
			if e&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.writable = true
			}
			if c.upstream {
				l.upEvent(c)
			} else {
				l.clientEvent(c, e&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
			}
		}
		l.wheel.advance(l.now, l.expire)
		if l.acceptAt != 0 && l.now >= l.acceptAt && !l.fdsClosed {
			// EEXIST: forget put it back already (Config.MaxConns).
			if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.lfd)}); err == nil || err == unix.EEXIST {
				l.acceptAt = 0
			}
		}
		if l.parked {
			// A Handler that parked a request started or woke a
			// goroutine to decide it, and the runtime queued that
			// goroutine on this loop's P (runnext), where it waits
			// for another P to steal it or the loop to yield. Measured
			// from Route to the goroutine's start, one request at a
			// time (bench/results/2026-12-02-s16/evhooks): median
			// 116-204 us without this yield, 16-78 us with it, at
			// normal priority under load; at idle priority 0.24-1.4 ms
			// against 10-19 us. Its cost: about 12% more CPU per
			// request when every request parks under saturation.
			l.parked = false
			runtime.Gosched()
		}
		if l.s.draining.Load() {
			l.drain()
		}
	}
}

// drain carries out Server.Shutdown on the loop: at its first call the
// backlog is accepted, the listener closed, idle client connections
// closed and every other one marked to close after its response (or
// after the request being read, by begin); drained
// is closed once no client connection is left.
func (l *loop) drain() {
	if !l.draining {
		l.draining = true
		l.accept()
		if l.lfd >= 0 {
			_ = unix.Close(l.lfd) // also leaves the epoll set
			l.lfd = -1
		}
		l.acceptAt, l.paused = 0, false // nothing to put back
		for _, c := range l.conns {
			if c == nil || c.upstream || c.closed {
				continue
			}
			switch c.state {
			case stIdle:
				if len(c.out) == 0 {
					l.close(c)
				} else {
					c.closeAfter = true // clientEvent closes it once written
				}
			case stWait, stPark:
				c.closeAfter = true
			}
			// stRead: begin marks it when its request is complete.
		}
	}
	if !l.drainedClosed && l.nclients+l.nrefusing == 0 {
		close(l.drained)
		l.drainedClosed = true
	}
}

// wake interrupts the loop's wait (through the eventfd, as Resume does).
func (l *loop) wake() {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if !l.qclosed {
		one := [8]byte{1}
		_, _ = unix.Write(l.efd, one[:])
	}
}

// wait returns the number of events in l.events (0 after a timeout or an
// interruption). The raw wait keeps the P (no scheduler hand-off, no
// sysmon retake); it is only used when the process has a P to spare, and
// yields after each timeout or signal so a stop-the-world never waits
// longer than one tick on it.
func (l *loop) wait() int {
	ms := int(timerTick / time.Millisecond)
	if l.raw {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), uintptr(ms), 0, 0)
		if e != 0 || r == 0 {
			runtime.Gosched()
			return 0
		}
		return int(r)
	}
	n, err := unix.EpollWait(l.epfd, l.events, ms)
	if err != nil {
		return 0 // EINTR; EBADF only after closeAll, when stop is set
	}
	return n
}

func (l *loop) add(c *conn) bool {
	l.gen++
	c.gen = l.gen
	if unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: connEvents, Fd: int32(c.fd), Pad: int32(c.gen)}) != nil {
		_ = unix.Close(c.fd)
		c.closed = true
		return false
	}
	for c.fd >= len(l.conns) {
		l.conns = append(l.conns, make([]*conn, len(l.conns)+64)...)
	}
	l.conns[c.fd] = c
	return true
}

// forget takes c out of the loop without closing its descriptor.
func (l *loop) forget(c *conn) {
	c.closed = true
	l.conns[c.fd] = nil
	l.wheel.disarm(c)
	if c.upstream {
		return
	}
	if c.overCap {
		l.nrefusing--
	} else {
		l.nclients--
	}
	if l.paused && l.nrefusing < l.cfg.MaxConns && !l.fdsClosed && !l.draining {
		if unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.lfd)}) == nil {
			l.paused = false
		}
	}
}

func (l *loop) close(c *conn) {
	if c.closed {
		return
	}
	l.forget(c)
	_ = unix.Close(c.fd) // also leaves the epoll set
}

func (l *loop) accept() {
	for {
		fd, sa, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
				// Out of descriptors or memory, the backlog still full:
				// the level-triggered listener would wake every wait at
				// once (a spin) until a descriptor frees. Stop accepting
				// for acceptPause, as nginx does.
				if unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.lfd, nil) == nil {
					l.acceptAt = l.now + int64(acceptPause)
				}
			}
			return // EAGAIN: none left
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		c := &conn{fd: fd, in: make([]byte, 0, inBuf), writable: true}
		c.req.Remote = addrPortOf(sa)
		if !l.add(c) {
			continue
		}
		if limit := l.cfg.MaxConns; limit > 0 {
			if l.nclients >= limit {
				c.overCap = true
				l.nrefusing++
				l.refused(c, 503, "connection cap")
				l.refuse(c, 503)
				if l.nrefusing >= limit && !c.closed {
					// As many being refused as served: stop accepting
					// until one ends (forget).
					if unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.lfd, nil) == nil {
						l.paused = true
						return
					}
				}
				continue
			}
		}
		l.nclients++
		c.state = stRead // the first request is bounded from the accept (slowloris)
		l.wheel.arm(c, l.now+int64(l.cfg.ReadTimeout))
	}
}

// enqueue queues a resume for the loop and wakes it; false after the
// loop stopped. The eventfd is written under qmu, so never after
// closeAll closed it, and only by the resume that finds the queue empty
// (the loop swaps the queue out after it has read the eventfd).
func (l *loop) enqueue(t Ticket) bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.qclosed {
		return false
	}
	l.queue = append(l.queue, t)
	if len(l.queue) == 1 {
		one := [8]byte{1}
		_, _ = unix.Write(l.efd, one[:])
	}
	return true
}

// resumeQueued resets the eventfd and resumes every queued ticket that
// still names a parked request.
func (l *loop) resumeQueued() {
	var b [8]byte
	_, _ = unix.Read(l.efd, b[:])
	l.qmu.Lock()
	q := l.queue
	l.queue = l.qspare[:0]
	l.qmu.Unlock()
	for _, t := range q {
		if int(t.fd) >= len(l.conns) {
			continue
		}
		c := l.conns[t.fd]
		if c == nil || c.upstream || c.gen != t.gen || c.state != stPark || c.parkSeq != t.seq {
			continue // the park ended; the descriptor may serve another
		}
		l.resume(c)
	}
	clear(q)
	l.qspare = q[:0]
}

// read reads into c.in's spare capacity and reports whether the socket is
// still open (false on EOF or an error). c.readable is cleared when the
// read found the socket drained.
func (l *loop) read(c *conn) bool {
	if len(c.in) == cap(c.in) {
		c.in = append(c.in, 0)[:len(c.in)]
	}
	space := c.in[len(c.in):cap(c.in)]
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&space[0])), uintptr(len(space)))
	switch {
	case e == unix.EAGAIN:
		c.readable = false
		return true
	case e == unix.EINTR:
		return true
	case e != 0 || r == 0:
		c.readable = false
		return false
	}
	if int(r) < len(space) {
		c.readable = false
	}
	c.in = c.in[:len(c.in)+int(r)]
	return true
}

// write writes b to c, or queues it behind bytes already waiting; what
// does not fit waits in c.out for an output edge. It returns false on an
// error (the caller closes).
func (l *loop) write(c *conn, b []byte) bool {
	if len(c.out) > 0 || !c.writable || c.connecting {
		c.out = append(c.out, b...)
		return true
	}
	for len(b) > 0 {
		r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
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
		r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&c.out[0])), uintptr(len(c.out)))
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			c.writable = false
			return true
		case e != 0:
			return false
		}
		c.out = c.out[:copy(c.out, c.out[r:])]
	}
	return true
}

// quiet reports whether an idle upstream socket has neither unread bytes
// nor a FIN nor an error (recv with MSG_PEEK|MSG_DONTWAIT finds nothing):
// the upstream guard's check right before a reuse, which closes the window
// between the loop's last epoll_wait and the reuse.
func quiet(fd int) bool {
	var b [1]byte
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return e == unix.EAGAIN
}
