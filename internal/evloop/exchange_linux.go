//go:build linux

package evloop

import (
	"bytes"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// clientEvent handles readiness on a client socket. gone reports the
// peer's FIN, a hang-up or an error.
func (l *loop) clientEvent(c *conn, gone bool) {
	if c.writable && len(c.out) > 0 {
		if !l.flush(c) {
			l.dropClient(c)
			return
		}
		if len(c.out) == 0 && c.peer != nil {
			l.pumpUp(c.peer) // it may have stopped for back-pressure
			if c.closed {
				return
			}
		}
	}
	switch c.state {
	case stWait, stPark:
		// The request is at the upstream. Input now is a pipelined request
		// (left in the socket: the edge stays remembered in c.readable) or
		// the client going away, which cancels the exchange: a FIN counts,
		// as in nginx, since a client that closed cannot be told apart
		// from one that only half-closed until a write fails.
		if gone {
			l.dropClient(c)
		}
		return
	case stLinger:
		l.linger(c)
		return
	}
	if len(c.out) == 0 && c.closeAfter {
		l.close(c)
		return
	}
	l.serveClient(c)
}

// serveClient reads and starts the next request while none is in flight
// and the previous response is fully written.
func (l *loop) serveClient(c *conn) {
	for !c.closed && (c.state == stIdle || c.state == stRead) && len(c.out) == 0 {
		if len(c.in) > 0 {
			outcome, status := parseRequest(c.in, &l.lim, &c.req)
			switch outcome {
			case parseRefuse:
				l.refused(c, status, refusalCause(status))
				l.refuse(c, status)
				return
			case parseHandOver:
				l.handOver(c)
				return
			case parseOK:
				if len(c.in) >= c.req.total {
					l.begin(c)
					continue
				}
				if len(c.in) == cap(c.in) {
					// Grow with the body bytes that arrive, up to its
					// length: a head alone must not cost the memory
					// of the length it declares.
					grown := make([]byte, len(c.in), min(c.req.total, 2*cap(c.in)))
					copy(grown, c.in)
					c.in = grown
				}
			}
		}
		if !c.readable {
			return
		}
		if !l.read(c) {
			l.close(c) // EOF between requests or inside one: nothing to answer
			return
		}
		if c.state == stIdle && len(c.in) > 0 {
			c.state = stRead
			l.wheel.arm(c, l.now+int64(l.cfg.ReadTimeout))
		}
	}
}

// begin asks the handler about the complete request at the start of c.in.
func (l *loop) begin(c *conn) {
	c.state = stWait
	c.closeAfter = c.req.close || l.draining
	l.wheel.disarm(c)
	c.req.buf = c.in
	c.req.tag = nil
	l.nextTicket(c)
	c.dec.reset()
	c.res = Result{Start: l.now, RequestBytes: c.req.total}
	l.cfg.Handler.Route(&c.req, &c.dec)
	l.act(c)
}

// nextTicket issues the ticket of the Handler call about to be made for
// c's request (a decision it makes may park).
func (l *loop) nextTicket(c *conn) {
	c.seq++
	c.req.ticket = Ticket{loop: l.idx, fd: int32(c.fd), gen: c.gen, seq: c.seq}
}

// act carries out c.dec: hand over, refuse, answer, park, or send.
func (l *loop) act(c *conn) {
	switch {
	case c.dec.HandOver:
		l.handOver(c)
	case c.dec.Status != 0:
		l.refuse(c, c.dec.Status)
	case c.dec.Response != nil:
		l.answer(c)
	case c.dec.Park:
		l.park(c)
	default:
		l.send(c)
	}
}

// answer writes the Handler's own response (Decision.Response) and
// serves the next request, or closes gracefully after it when the
// decision or the client asks.
func (l *loop) answer(c *conn) {
	resp := c.dec.Response
	if !c.dec.Close && !c.closeAfter {
		if !l.write(c, resp) {
			l.close(c)
			return
		}
		l.nextRequest(c)
		return
	}
	c.closeAfter = true
	l.out = l.out[:0]
	if end := bytes.Index(resp, crlfcrlf); end >= 0 {
		l.out = append(l.out, resp[:end+2]...)
		l.out = append(l.out, "Connection: close\r\n"...)
		l.out = append(l.out, resp[end+2:]...)
	} else {
		l.out = append(l.out, resp...) // not a response: the caller's bytes as they are
	}
	l.closeWith(c, l.out)
}

// park defers c's decision until Server.Resume with the ticket of the
// Handler call that made it, or Decision.ParkTimeout.
func (l *loop) park(c *conn) {
	if l.resumer == nil {
		l.refused(c, 500, "park without a Resumer")
		l.refuse(c, 500)
		return
	}
	c.state = stPark
	l.parked = true
	c.parkSeq = c.seq
	c.parkStatus = c.dec.ParkStatus
	if c.parkStatus == 0 {
		c.parkStatus = 504
	}
	c.res.Tag = c.dec.Tag
	l.wheel.arm(c, l.now+max(int64(c.dec.ParkTimeout), 1))
}

// resume asks the Resumer for the decision of a parked request.
func (l *loop) resume(c *conn) {
	l.wheel.disarm(c)
	c.state = stWait
	c.req.buf = c.in
	c.req.tag = c.res.Tag
	l.nextTicket(c)
	c.dec.reset()
	l.resumer.Resumed(&c.req, &c.dec)
	l.act(c)
}

// parkEnded reports a parked request that ended without a decision.
func (l *loop) parkEnded(c *conn, status int, err error) {
	c.res.Status, c.res.Err, c.res.End = status, err, l.now
	c.req.buf = c.in
	l.cfg.Handler.Done(&c.req, &c.res, nil)
}

// refused reports a refusal the loop makes on its own.
func (l *loop) refused(c *conn, status int, cause string) {
	if l.refusals != nil {
		rf := Refusal{Status: status, Cause: cause, Remote: c.req.Remote}
		l.refusals.Refused(&rf)
	}
}

// refusalCause names the rule behind a status parseRequest refuses with.
func refusalCause(status int) string {
	switch status {
	case 413:
		return "body too large"
	case 431:
		return "head too large"
	case 505:
		return "HTTP version not supported"
	}
	return "malformed request"
}

// send starts an attempt of c's request to c.dec.Upstream.
func (l *loop) send(c *conn) {
	c.res.Upstream, c.res.Tag, c.res.Reused = c.dec.Upstream, c.dec.Tag, false
	u := l.upstream(c.dec.Upstream)
	if u == nil {
		l.attemptFailed(c, nil, ErrConnect, true)
		return
	}
	c.res.Reused = u.reused
	u.peer, c.peer = c, u
	u.remain, u.gotByte, u.reusable, u.in = -1, false, false, u.in[:0]
	l.wheel.arm(u, l.now+int64(l.cfg.FirstByteTimeout))
	l.out = appendUpstreamRequest(l.out[:0], &c.req, &c.dec)
	if !l.write(u, l.out) {
		l.attemptFailed(c, u, ErrUpstreamClosed, u.reused)
	}
}

// upstream returns an idle keep-alive connection to addr that passes the
// guard's peek, or a new one (connecting); nil when a socket cannot be
// opened.
func (l *loop) upstream(addr netip.AddrPort) *conn {
	p := l.pools[addr]
	for len(p) > 0 {
		u := p[len(p)-1]
		p[len(p)-1] = nil
		p = p[:len(p)-1]
		u.idle = false
		if !quiet(u.fd) {
			// Bytes, a FIN or an error arrived after the loop's last wait:
			// never write a request to it.
			l.close(u)
			continue
		}
		l.pools[addr] = p
		u.reused = true
		return u
	}
	l.pools[addr] = p
	sa, family := sockaddr(addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	u := &conn{fd: fd, upstream: true, addr: addr, in: make([]byte, 0, inBuf)}
	switch err := unix.Connect(fd, sa); err {
	case nil:
		u.writable = true
	case unix.EINPROGRESS:
		u.connecting = true
	default:
		_ = unix.Close(fd)
		return nil
	}
	if !l.add(u) {
		return nil
	}
	return u
}

// upEvent handles readiness on an upstream socket.
func (l *loop) upEvent(u *conn) {
	if u.idle {
		// An idle keep-alive connection has nothing to say: any input
		// (stray bytes, a FIN, an error) retires it at the event.
		if u.readable {
			l.retireIdle(u)
		}
		return
	}
	c := u.peer
	if c == nil {
		l.close(u)
		return
	}
	if u.connecting {
		if !u.writable {
			return
		}
		u.connecting = false
		if v, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || v != 0 {
			l.attemptFailed(c, u, ErrConnect, true)
			return
		}
	}
	if u.writable && len(u.out) > 0 && !l.flush(u) {
		l.attemptFailed(c, u, ErrUpstreamClosed, u.reused && !u.gotByte)
		return
	}
	l.pumpUp(u)
}

// pumpUp reads the response and relays it to the client as it comes,
// stopping while the client has maxPending bytes unwritten.
func (l *loop) pumpUp(u *conn) {
	c := u.peer
	for !u.closed && u.readable && c != nil && len(c.out) < maxPending {
		if !l.read(u) {
			if !u.gotByte {
				// Closed or reset before any response byte: a reused
				// connection the upstream dropped while idle never had the
				// request acted on.
				l.attemptFailed(c, u, ErrUpstreamClosed, u.reused)
				return
			}
			l.cut(c, u, ErrUpstreamClosed)
			return
		}
		if len(u.in) == 0 {
			continue
		}
		if !u.gotByte {
			u.gotByte = true
			c.res.FirstByte = l.now
		}
		l.wheel.arm(u, l.now+int64(l.cfg.ReadIdleTimeout))
		if u.remain < 0 {
			var h respHead
			switch parseResponse(u.in, l.cfg.MaxHeadBytes, &h) {
			case parseMore:
				continue
			case parseRefuse:
				l.attemptFailed(c, u, ErrBadResponse, false)
				return
			}
			c.res.Status = h.status
			u.reusable = !h.close
			var edits *ResponseHead
			if l.heads != nil {
				if l.askHead(c, u, &h) {
					return
				}
				edits = &l.rh
			}
			// The head and the body bytes already read go out in one
			// write: a second write would cost a second loopback send,
			// the largest cost per request.
			body := u.in[h.size:]
			k := min(len(body), h.length)
			if len(body) > h.length {
				u.reusable = false // bytes after the response: never reuse
			}
			l.out = appendResponseHead(l.out[:0], u.in[:h.size], c.closeAfter, edits)
			l.out = append(l.out, body[:k]...)
			c.res.ResponseBytes += int64(len(l.out))
			c.res.BodyBytes += int64(k)
			if !l.write(c, l.out) {
				l.dropClient(c)
				return
			}
			u.remain = h.length - k
			u.in = u.in[:0]
			if u.remain == 0 {
				l.finish(c, u)
				return
			}
			continue
		}
		k := min(len(u.in), u.remain)
		if len(u.in) > u.remain {
			u.reusable = false // bytes after the response: never reuse
		}
		if k > 0 && !l.write(c, u.in[:k]) {
			l.dropClient(c)
			return
		}
		u.remain -= k
		c.res.ResponseBytes += int64(k)
		c.res.BodyBytes += int64(k)
		u.in = u.in[:0]
		if u.remain == 0 {
			l.finish(c, u)
			return
		}
	}
}

// askHead shows the response head to the HeadHandler and, when it asks
// for a retry within the attempt bound, discards the response, reports the
// attempt and acts on the retry: it returns true then (c and u are done
// with). Otherwise l.rh holds the Handler's edits.
func (l *loop) askHead(c, u *conn, h *respHead) bool {
	rh := &l.rh
	*rh = ResponseHead{Status: h.status, ContentLength: h.length, Set: rh.Set[:0], Del: rh.Del[:0], raw: u.in[:h.size]}
	c.req.buf = c.in
	c.req.tag = c.res.Tag
	l.nextTicket(c)
	c.retry.reset()
	if !l.heads.Head(&c.req, rh, &c.retry) || c.res.Attempt+1 >= maxAttempts {
		return false
	}
	rh.raw = nil
	// Keep the connection only if the whole body came with the head:
	// the loop never waits to drain a discarded answer.
	u.peer, c.peer = nil, nil
	if len(u.in)-h.size == h.length && u.reusable {
		l.release(u)
	} else {
		l.close(u)
	}
	c.res.Err, c.res.End = ErrDiscarded, l.now
	l.cfg.Handler.Done(&c.req, &c.res, nil)
	l.retryWith(c)
	return true
}

// retryWith acts on c.retry, a new attempt of c's request.
func (l *loop) retryWith(c *conn) {
	c.dec, c.retry = c.retry, c.dec
	attempt := c.res.Attempt + 1
	c.res = Result{Start: c.res.Start, RequestBytes: c.req.total, Attempt: attempt}
	l.act(c)
}

// finish ends an exchange whose response is all relayed (or queued for
// the client): the upstream connection goes back to its pool, the handler
// hears the outcome, and the client's next request, if any, starts.
func (l *loop) finish(c, u *conn) {
	u.peer, c.peer = nil, nil
	l.release(u)
	c.res.End = l.now
	c.req.buf = c.in
	l.cfg.Handler.Done(&c.req, &c.res, nil)
	l.nextRequest(c)
}

// nextRequest consumes the finished request from c.in and makes the
// connection wait for the next one.
func (l *loop) nextRequest(c *conn) {
	n := copy(c.in, c.in[c.req.total:])
	c.in = c.in[:n]
	if cap(c.in) > keepBuf && n <= inBuf {
		small := make([]byte, n, inBuf)
		copy(small, c.in)
		c.in = small
	}
	if c.closeAfter {
		if len(c.out) == 0 {
			l.close(c)
			return
		}
		// clientEvent closes it once the response is written; IdleTimeout
		// bounds a client that does not read it.
		c.state = stIdle
		l.wheel.arm(c, l.now+int64(l.cfg.IdleTimeout))
		return
	}
	if n > 0 {
		c.state = stRead
		l.wheel.arm(c, l.now+int64(l.cfg.ReadTimeout))
	} else {
		c.state = stIdle
		l.wheel.arm(c, l.now+int64(l.cfg.IdleTimeout))
	}
	l.serveClient(c)
}

// release puts a finished upstream connection back in its pool, or
// closes it when the response forbade reuse, bytes may follow it, or the
// pool is full.
func (l *loop) release(u *conn) {
	p := l.pools[u.addr]
	if !u.reusable || u.readable || len(u.out) > 0 || len(p) >= l.cfg.MaxIdlePerUpstream {
		l.close(u)
		return
	}
	u.idle, u.in = true, u.in[:0]
	l.pools[u.addr] = append(p, u)
	l.wheel.arm(u, l.now+int64(l.cfg.IdleConnTTL))
}

// retireIdle closes an idle upstream connection and takes it out of its
// pool.
func (l *loop) retireIdle(u *conn) {
	p := l.pools[u.addr]
	for i, v := range p {
		if v == u {
			p[i] = p[len(p)-1]
			p[len(p)-1] = nil
			l.pools[u.addr] = p[:len(p)-1]
			break
		}
	}
	u.idle = false
	l.close(u)
}

// attemptFailed ends an attempt that failed before any response byte went
// to the client: the handler hears it and may send a retry; otherwise the
// client gets 502 (504 after a first-byte timeout).
func (l *loop) attemptFailed(c *conn, u *conn, err error, retryable bool) {
	if u != nil {
		u.peer = nil
		l.close(u)
	}
	c.peer = nil
	status := 502
	if err == ErrFirstByteTimeout {
		status = 504
	}
	c.res.Status, c.res.Err, c.res.Retryable, c.res.End = status, err, retryable, l.now
	c.req.buf = c.in
	c.req.tag = c.res.Tag
	l.nextTicket(c)
	c.retry.reset()
	again := l.cfg.Handler.Done(&c.req, &c.res, &c.retry)
	if again && retryable && c.res.Attempt+1 < maxAttempts {
		l.retryWith(c)
		return
	}
	l.refuse(c, status)
}

// cut ends an exchange whose response had started: the client's
// connection is closed (its response is incomplete).
func (l *loop) cut(c, u *conn, err error) {
	u.peer, c.peer = nil, nil
	l.close(u)
	c.res.Err, c.res.End = err, l.now
	c.req.buf = c.in
	l.cfg.Handler.Done(&c.req, &c.res, nil)
	l.close(c)
}

// dropClient closes a client that went away or failed; an exchange in
// flight is cancelled by closing its upstream connection, and reported as
// 499.
func (l *loop) dropClient(c *conn) {
	if u := c.peer; u != nil {
		u.peer, c.peer = nil, nil
		l.close(u)
		c.res.Status, c.res.Err, c.res.End = 499, ErrClientGone, l.now
		c.req.buf = c.in
		l.cfg.Handler.Done(&c.req, &c.res, nil)
	} else if c.state == stPark {
		c.state = stWait // the ticket no longer applies
		l.parkEnded(c, 499, ErrClientGone)
	}
	l.close(c)
}

// refuse answers with the caller's closing error response and closes
// gracefully: the sending side is shut and input drained until the client
// closes or ReadTimeout passes, so unread input does not turn the close
// into a reset that destroys the answer.
func (l *loop) refuse(c *conn, status int) {
	l.closeWith(c, l.cfg.ErrorResponse(status))
}

// closeWith writes resp, a closing answer, and closes gracefully as
// refuse does.
func (l *loop) closeWith(c *conn, resp []byte) {
	c.state = stLinger
	c.closeAfter = true
	if !l.write(c, resp) {
		l.close(c)
		return
	}
	c.in = c.in[:0]
	l.wheel.arm(c, l.now+int64(l.cfg.ReadTimeout))
	l.linger(c)
}

// linger shuts the sending side once the answer is written and discards
// input until EOF.
func (l *loop) linger(c *conn) {
	if len(c.out) > 0 {
		return // clientEvent flushes at the next output edge
	}
	_ = unix.Shutdown(c.fd, unix.SHUT_WR)
	for c.readable {
		c.in = c.in[:0]
		if !l.read(c) {
			l.close(c)
			return
		}
	}
}

// onExpire handles a deadline that passed.
func (l *loop) onExpire(c *conn) {
	if c.closed {
		return
	}
	if c.upstream {
		switch p := c.peer; {
		case c.idle:
			l.retireIdle(c) // IdleConnTTL
		case p == nil:
			l.close(c)
		case !c.gotByte:
			l.attemptFailed(p, c, ErrFirstByteTimeout, false)
		default:
			l.cut(p, c, ErrReadTimeout)
		}
		return
	}
	switch c.state {
	case stIdle, stLinger:
		l.close(c)
	case stRead:
		l.refused(c, 408, "read timeout")
		l.refuse(c, 408)
	case stPark:
		status := c.parkStatus
		c.state = stWait // the ticket no longer applies
		l.parkEnded(c, status, ErrParkTimeout)
		l.refuse(c, status)
	}
}

// handOver gives the client connection to the fallback: it leaves the
// epoll set and the loop, becomes a net.Conn, and the bytes read so far
// are replayed to the fallback before the socket's.
func (l *loop) handOver(c *conn) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	l.forget(c)
	f := os.NewFile(uintptr(c.fd), "evloop-client")
	nc, err := net.FileConn(f) // a duplicate, registered with the runtime's poller
	_ = f.Close()
	if err != nil {
		return
	}
	var pre []byte
	if len(c.in) > 0 {
		pre = append(make([]byte, 0, len(c.in)), c.in...)
	}
	go l.cfg.Fallback(newReplayConn(nc, pre))
}
