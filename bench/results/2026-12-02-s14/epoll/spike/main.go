// Command epollspike is a feasibility spike for issue 12 (session 14): a
// minimal HTTP/1.1 reverse proxy for the overhead benchmark's shape only,
// built on event loops of its own instead of Go's netpoller. It is not
// probegate and not meant to become it; see the README one folder up.
//
// N loops (default GOMAXPROCS), each a goroutine locked to its OS thread
// that blocks in epoll_wait. Each loop has its own SO_REUSEPORT listener,
// its own keep-alive upstream connections (registered in the same epoll
// set) and its own buffers, so nothing is handed between loops; only the
// per-backend in-flight counters are shared (atomics), for least in-flight.
//
// Usage: epollspike -listen 127.0.0.1:18290 -upstreams 127.0.0.1:18201,127.0.0.1:18202
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
)

// backend is one upstream: its address and the requests in flight to it
// from every loop.
type backend struct {
	addr     syscall.SockaddrInet4
	inflight atomic.Int64
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18290", "address to serve")
	ups := flag.String("upstreams", "127.0.0.1:18201,127.0.0.1:18202", "comma-separated upstream addresses (IPv4)")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "event loops (one OS thread each)")
	poll0 := flag.Bool("poll0", false, "try a non-blocking epoll_wait (raw, no scheduler hand-off) before the blocking one")
	rawWait := flag.Bool("rawwait", false, "block in a raw epoll_wait (10 ms timeout) that keeps the P, instead of syscall.EpollWait")
	check := flag.Bool("check", false, "before reusing an idle upstream connection, peek it (recv MSG_PEEK|MSG_DONTWAIT must find nothing): the upstream guard's check")
	bg := flag.Duration("bg", 0, "run background(): a timer goroutine forcing a GC every period, reporting timer lateness and GC time on SIGTERM")
	flag.Parse()

	var bes []*backend
	for _, a := range strings.Split(*ups, ",") {
		sa, err := sockaddr(a)
		if err != nil {
			fatal(err)
		}
		bes = append(bes, &backend{addr: *sa})
	}
	lsa, err := sockaddr(*listen)
	if err != nil {
		fatal(err)
	}
	raiseNoFile()
	errc := make(chan error, *loops)
	for i := range *loops {
		l, err := newLoop(lsa, bes, *poll0, *rawWait, *check)
		if err != nil {
			fatal(err)
		}
		l.rr = i
		go func() { errc <- l.run() }()
	}
	if *bg > 0 {
		go background(*bg)
	}
	fatal(<-errc)
}

func sockaddr(hostport string) (*syscall.SockaddrInet4, error) {
	ta, err := net.ResolveTCPAddr("tcp4", hostport)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	return sa, nil
}

func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "epollspike:", err)
	os.Exit(1)
}
