package bench

import (
	"bytes"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// rawUpstream is the overhead scenario's fast upstream as one epoll loop on
// one OS thread, the way nginx's worker serves: every ready socket is read
// with read(2), every complete request answered at once with write(2), and
// nothing is handed between goroutines or threads. It answers POSTs with
// fastBody and GET /metrics with fastMetrics (HTTP/1.1 keep-alive,
// pipelined requests in order), and does not stream: the idle-stream
// measurement keeps the fasthttp upstream.
//
// Why: the upstreams share the bench's 2 CPUs with the generator and the
// target, and the fasthttp upstream (Go's netpoller, a goroutine parked and
// woken per request) used 43-54 µs of CPU per request at 10k req/s
// (session 7), about half a CPU; this loop uses far less (see
// bench/README.md), which every target gets back alike.
type rawUpstream struct {
	lfd   int // listening socket
	epfd  int
	wake  int // eventfd that Close writes to end the loop
	conns map[int32]*rawConn
}

// rawConn is one client connection: bytes read and not yet answered, and
// answer bytes not yet written (the socket was full).
type rawConn struct {
	in  []byte
	out []byte
}

// rawMaxHeader bounds a request's head; a longer one closes the connection.
const rawMaxHeader = 16 << 10

var (
	rawHeadJSON    = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(fastBody)) + "\r\n\r\n")
	rawHeadMetrics = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " + strconv.Itoa(len(fastMetrics)) + "\r\n\r\n")
	rawHead400     = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	crlfcrlf       = []byte("\r\n\r\n")
	contentLength  = []byte("\r\ncontent-length:")
)

// newRawUpstream listens on addr (host:port, IPv4).
func newRawUpstream(addr string) (*rawUpstream, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	u := &rawUpstream{lfd: lfd, epfd: -1, wake: -1, conns: map[int32]*rawConn{}}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	_ = syscall.SetsockoptInt(lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err = syscall.Bind(lfd, sa); err == nil {
		err = syscall.Listen(lfd, 4096)
	}
	if err == nil {
		u.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	}
	if err == nil {
		var fd uintptr
		fd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		if errno != 0 {
			err = errno
		}
		u.wake = int(fd)
	}
	if err == nil {
		err = u.watch(lfd, syscall.EPOLL_CTL_ADD, syscall.EPOLLIN)
	}
	if err == nil {
		err = u.watch(u.wake, syscall.EPOLL_CTL_ADD, syscall.EPOLLIN)
	}
	if err != nil {
		u.closeFDs()
		return nil, err
	}
	return u, nil
}

// Addr is the address the upstream listens on.
func (u *rawUpstream) Addr() string {
	sa, err := syscall.Getsockname(u.lfd)
	if sa4, ok := sa.(*syscall.SockaddrInet4); ok && err == nil {
		return net.JoinHostPort(net.IP(sa4.Addr[:]).String(), strconv.Itoa(sa4.Port))
	}
	return ""
}

func (u *rawUpstream) watch(fd, op int, events uint32) error {
	return syscall.EpollCtl(u.epfd, op, fd, &syscall.EpollEvent{Events: events, Fd: int32(fd)})
}

// Close ends Serve, which then closes every socket.
func (u *rawUpstream) Close() {
	one := uint64(1)
	_, _ = syscall.Write(u.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// Serve runs the loop on the calling goroutine, locked to its OS thread,
// until Close.
func (u *rawUpstream) Serve() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer u.closeFDs()
	events := make([]syscall.EpollEvent, 256)
	for {
		// The wait goes through Go's scheduler (syscall.EpollWait enters
		// and leaves the system call properly): a raw wait never reaches a
		// preemption point, so a stop-the-world (GC) waited on this loop
		// and stalled the whole process (CI, GOMAXPROCS=1: 88 s).
		n, err := syscall.EpollWait(u.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		for _, ev := range events[:n] {
			switch fd := int(ev.Fd); fd {
			case u.wake:
				return nil
			case u.lfd:
				u.accept()
			default:
				u.serveConn(fd, ev.Events)
			}
		}
	}
}

func (u *rawUpstream) accept() {
	for {
		fd, _, err := syscall.Accept4(u.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: no more; anything else: try at the next event
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		if u.watch(fd, syscall.EPOLL_CTL_ADD, syscall.EPOLLIN|syscall.EPOLLRDHUP) != nil {
			_ = syscall.Close(fd)
			continue
		}
		u.conns[int32(fd)] = &rawConn{in: make([]byte, 0, 4096)}
	}
}

// serveConn reads what fd has, answers every complete request in it, and
// writes what it can of the answers.
func (u *rawUpstream) serveConn(fd int, events uint32) {
	c := u.conns[int32(fd)]
	if c == nil {
		return
	}
	if events&syscall.EPOLLOUT != 0 && len(c.out) > 0 {
		if !u.flush(fd, c) {
			return
		}
	}
	if events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) == 0 {
		return
	}
	if len(c.in) == cap(c.in) {
		c.in = append(c.in, 0)[:len(c.in)]
	}
	k, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&c.in[len(c.in):cap(c.in)][0])), uintptr(cap(c.in)-len(c.in)))
	if errno == syscall.EAGAIN || errno == syscall.EINTR {
		return
	}
	if errno != 0 || k == 0 {
		u.drop(fd)
		return
	}
	c.in = c.in[:len(c.in)+int(k)]
	used, bad := answer(c.in, &c.out)
	c.in = c.in[:copy(c.in, c.in[used:])]
	if bad || len(c.in) > rawMaxHeader {
		c.out = append(c.out, rawHead400...)
		u.flush(fd, c)
		u.drop(fd)
		return
	}
	if len(c.out) > 0 {
		u.flush(fd, c)
	}
}

// flush writes c.out to fd; with bytes left over it waits for EPOLLOUT.
// It reports whether the connection is still open.
func (u *rawUpstream) flush(fd int, c *rawConn) bool {
	for len(c.out) > 0 {
		k, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&c.out[0])), uintptr(len(c.out)))
		if errno == syscall.EINTR {
			continue
		}
		if errno == syscall.EAGAIN {
			_ = u.watch(fd, syscall.EPOLL_CTL_MOD, syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLOUT)
			return true
		}
		if errno != 0 {
			u.drop(fd)
			return false
		}
		c.out = c.out[:copy(c.out, c.out[k:])]
	}
	_ = u.watch(fd, syscall.EPOLL_CTL_MOD, syscall.EPOLLIN|syscall.EPOLLRDHUP)
	return true
}

func (u *rawUpstream) drop(fd int) {
	delete(u.conns, int32(fd))
	_ = syscall.Close(fd) // also leaves the epoll set
}

func (u *rawUpstream) closeFDs() {
	for fd := range u.conns {
		_ = syscall.Close(int(fd))
	}
	for _, fd := range []int{u.lfd, u.epfd, u.wake} {
		if fd >= 0 {
			_ = syscall.Close(fd)
		}
	}
}

// answer appends to out the answer of every complete request at the start
// of in, in order, and returns how many bytes of in they took; bad reports
// a request it cannot frame (no or a malformed Content-Length on a POST).
func answer(in []byte, out *[]byte) (used int, bad bool) {
	for {
		rest := in[used:]
		end := bytes.Index(rest, crlfcrlf)
		if end < 0 {
			return used, false
		}
		head := rest[:end+2] // keep the last CRLF so that every field starts after one
		n := 0
		if i := indexFold(head, contentLength); i >= 0 {
			v := head[i+len(contentLength):]
			v = v[:bytes.IndexByte(v, '\r')]
			var err error
			if n, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil || n < 0 {
				return used, true
			}
		} else if bytes.HasPrefix(head, []byte("POST ")) {
			return used, true // chunked or unframed: not the bench's traffic
		}
		total := end + 4 + n
		if len(rest) < total {
			return used, false
		}
		if bytes.HasPrefix(head, []byte("GET /metrics")) {
			*out = append(append(*out, rawHeadMetrics...), fastMetrics...)
		} else {
			*out = append(append(*out, rawHeadJSON...), fastBody...)
		}
		used += total
	}
}

// indexFold is bytes.Index with the ASCII letters of s folded to lower
// case (sub is lower case).
func indexFold(s, sub []byte) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
			j++
		}
		if j == len(sub) {
			return i
		}
	}
	return -1
}

// rawUpstreamSupported reports whether this OS has the raw upstream.
const rawUpstreamSupported = true
