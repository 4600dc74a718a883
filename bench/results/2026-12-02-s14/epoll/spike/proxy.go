package main

import (
	"syscall"
	"unsafe"
)

// clientEvent handles readiness on a client socket. hup reports the
// peer's half-close, a hang-up or an error.
func (l *loop) clientEvent(c *conn, hup bool) {
	if c.writable && len(c.out) > 0 {
		if !l.flush(c) {
			l.dropClient(c)
			return
		}
		if len(c.out) == 0 {
			if c.peer != nil {
				l.pumpUp(c.peer) // it may have stopped for back-pressure
				return
			}
			if c.closeAfter && !c.waiting {
				l.close(c)
				return
			}
		}
	}
	if c.waiting {
		// The request is at the upstream. Input now is a pipelined
		// request (left in the socket until the answer is out: the edge
		// stays remembered in c.readable) or the client going away, which
		// cancels the exchange.
		if hup {
			l.dropClient(c)
		}
		return
	}
	l.pumpClient(c)
}

// pumpClient starts the exchange of a complete buffered request, reading
// more while the socket has input and none is complete.
func (l *loop) pumpClient(c *conn) {
	for !c.closed && !c.waiting && len(c.out) == 0 {
		var h head
		switch parseHead(c.in, &h) {
		case headTooLong:
			l.refuse(c, resp431)
			return
		case headBad:
			l.refuse(c, resp400)
			return
		case headOK:
			if h.chunked {
				l.refuse(c, resp501)
				return
			}
			if h.length > maxBody {
				l.refuse(c, resp413)
				return
			}
			total := h.size + h.length
			if len(c.in) >= total {
				c.closeAfter = h.close
				l.startExchange(c, total)
				continue
			}
			if cap(c.in) < total {
				c.in = append(c.in[:cap(c.in)], make([]byte, total-cap(c.in))...)[:len(c.in)]
			}
		}
		if !c.readable {
			return
		}
		if len(c.in) == cap(c.in) {
			c.in = append(c.in, 0)[:len(c.in)] // head longer than the buffer
		}
		if !l.read(c) {
			l.close(c)
			return
		}
	}
}

// refuse answers with a closing error and closes.
func (l *loop) refuse(c *conn, resp []byte) {
	_ = l.write(c, resp)
	l.close(c)
}

// pick is least in-flight over every backend, ties rotated per loop.
func (l *loop) pick() int {
	n := len(l.bes)
	best, bestN := -1, int64(0)
	l.rr++
	for k := range n {
		i := (l.rr + k) % n
		if v := l.bes[i].inflight.Load(); best < 0 || v < bestN {
			best, bestN = i, v
		}
	}
	return best
}

// upstream returns an idle keep-alive connection to backend be, or dials
// a new one.
func (l *loop) upstream(be int) *conn {
	for p := l.idle[be]; len(p) > 0; p = l.idle[be] {
		u := p[len(p)-1]
		l.idle[be] = p[:len(p)-1]
		u.idle = false
		if l.check && !quiet(u.fd) {
			// Bytes or a close arrived after the loop's last wait: the
			// event for them is still in the kernel's ready list.
			l.close(u)
			continue
		}
		return u
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	u := &conn{fd: fd, upstream: true, be: be, in: make([]byte, 0, 4096)}
	switch err := syscall.Connect(fd, &l.bes[be].addr); err {
	case nil:
		u.writable = true
	case syscall.EINPROGRESS:
		u.connecting = true
	default:
		_ = syscall.Close(fd)
		return nil
	}
	if !l.add(u) {
		return nil
	}
	return u
}

// startExchange sends the request at the start of c.in (total bytes) to
// the least loaded backend. A reused connection that fails the write is
// one the upstream closed while idle: the request was not sent, so it is
// sent once more on a fresh connection.
func (l *loop) startExchange(c *conn, total int) {
	be := l.pick()
	for attempt := 0; ; attempt++ {
		u := l.upstream(be)
		if u == nil {
			l.refuse(c, resp502)
			return
		}
		u.remain, u.sent, u.reusable, u.in = -1, 0, false, u.in[:0]
		if l.write(u, c.in[:total]) {
			l.bes[be].inflight.Add(1)
			c.peer, u.peer, c.waiting = u, c, true
			c.in = c.in[:copy(c.in, c.in[total:])]
			return
		}
		l.close(u)
		if attempt > 0 {
			l.refuse(c, resp502)
			return
		}
	}
}

// upEvent handles readiness on an upstream socket.
func (l *loop) upEvent(u *conn) {
	if u.idle {
		// An idle keep-alive connection has nothing to say: any input
		// (stray bytes, a FIN, an error) retires it before a request can be
		// written to it. This is the upstream guard's stray-byte check,
		// paid only when it fires.
		if u.readable {
			l.retireIdle(u)
		}
		return
	}
	if u.connecting {
		if !u.writable {
			return
		}
		u.connecting = false
		if v, err := syscall.GetsockoptInt(u.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || v != 0 {
			l.failUp(u)
			return
		}
	}
	if u.writable && len(u.out) > 0 && !l.flush(u) {
		l.failUp(u)
		return
	}
	l.pumpUp(u)
}

// pumpUp reads the response and relays it to the client as it comes,
// stopping while the client has maxPending bytes unwritten.
func (l *loop) pumpUp(u *conn) {
	c := u.peer
	for u.readable && c != nil && len(c.out) < maxPending {
		if u.remain < 0 && len(u.in) == cap(u.in) {
			if len(u.in) > maxHead {
				l.failUp(u)
				return
			}
			u.in = append(u.in, 0)[:len(u.in)]
		}
		if !l.read(u) {
			l.failUp(u)
			return
		}
		if len(u.in) == 0 {
			continue
		}
		if u.remain < 0 {
			var h head
			switch parseHead(u.in, &h) {
			case headMore:
				continue
			case headOK:
				if !h.chunked {
					u.remain, u.reusable = h.size+h.length, !h.close
					break
				}
				fallthrough
			default:
				l.failUp(u)
				return
			}
		}
		k := min(len(u.in), u.remain)
		if len(u.in) > u.remain {
			u.reusable = false // bytes after the response: never reuse
		}
		if !l.write(c, u.in[:k]) {
			l.dropClient(c)
			return
		}
		u.remain -= k
		u.sent += k
		u.in = u.in[:0]
		if u.remain == 0 {
			l.finish(u, c)
			return
		}
	}
}

// finish ends an exchange whose response is all relayed (or queued for
// the client): the upstream connection goes back to the pool, and the
// client's next request, if any, starts.
func (l *loop) finish(u, c *conn) {
	l.bes[u.be].inflight.Add(-1)
	u.peer, c.peer, c.waiting = nil, nil, false
	if u.reusable && !u.readable {
		u.idle = true
		l.idle[u.be] = append(l.idle[u.be], u)
	} else {
		l.close(u)
	}
	if c.closeAfter {
		if len(c.out) == 0 {
			l.close(c)
		}
		return
	}
	l.pumpClient(c)
}

// failUp ends an exchange whose upstream failed: a 502 if nothing was
// relayed yet, else the client's connection is cut (its response is
// incomplete).
func (l *loop) failUp(u *conn) {
	c := u.peer
	l.close(u)
	if c == nil {
		return
	}
	l.bes[u.be].inflight.Add(-1)
	u.peer, c.peer, c.waiting = nil, nil, false
	if u.sent == 0 {
		l.refuse(c, resp502)
		return
	}
	l.close(c)
}

// dropClient closes a client that went away or failed; an exchange in
// flight is cancelled by closing its upstream connection (its response can
// no longer be used).
func (l *loop) dropClient(c *conn) {
	if u := c.peer; u != nil {
		l.bes[u.be].inflight.Add(-1)
		u.peer, c.peer, c.waiting = nil, nil, false
		l.close(u)
	}
	l.close(c)
}

// retireIdle closes an idle upstream connection and removes it from its
// pool.
func (l *loop) retireIdle(u *conn) {
	p := l.idle[u.be]
	for i, v := range p {
		if v == u {
			p[i] = p[len(p)-1]
			l.idle[u.be] = p[:len(p)-1]
			break
		}
	}
	u.idle = false
	l.close(u)
}

// quiet reports whether an idle upstream socket has neither unread bytes
// nor a FIN (recv with MSG_PEEK|MSG_DONTWAIT finds nothing): the upstream
// guard's check before a reuse, as one system call. The loop's epoll set
// already retires a socket whose input it has seen; this closes the
// window between the last epoll_wait and the reuse.
func quiet(fd int) bool {
	var b [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e == syscall.EAGAIN
}
