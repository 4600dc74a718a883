//go:build linux

package evloop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdChildEnv makes the test binary the child of
// TestAcceptAtTheDescriptorLimitDoesNotSpin.
const fdChildEnv = "EVLOOP_HOSTILE_FD_CHILD"

// A loop out of file descriptors does not spin on its listener: with
// connections waiting in the backlog and accept4 failing with EMFILE, the
// level-triggered listener made every epoll_wait return at once, so the
// loop turned as fast as a core allowed (nginx disables accepting for a
// while instead). The loop runs in a child process whose descriptor limit
// leaves room for two accepts; this process connects eight clients to it.
// The child counts its loop's turns over one second through the injected
// clock (read once per turn): a loop waiting on its 10 ms tick turns about
// 100 times, a spinning one tens of thousands of times, even on a small
// share of a loaded core. Once the limit is raised again, a connection
// that waited in the backlog is served.
func TestAcceptAtTheDescriptorLimitDoesNotSpin(t *testing.T) {
	if os.Getenv(fdChildEnv) != "" {
		fdLimitChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptAtTheDescriptorLimitDoesNotSpin$")
	cmd.Env = append(os.Environ(), fdChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	line := func() string {
		if !out.Scan() {
			t.Fatalf("the child ended: %v", out.Err())
		}
		return out.Text()
	}
	addr := strings.TrimPrefix(line(), "addr ")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if _, err := fmt.Fprintln(stdin, "go"); err != nil {
		t.Fatal(err)
	}
	turns, err := strconv.Atoi(strings.TrimPrefix(line(), "turns "))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loop turns in 1 s at the descriptor limit, 8 connections waiting: %d", turns)
	if turns > 1000 {
		t.Fatalf("the loop turned %d times in 1 s: it spins on a listener it cannot accept from", turns)
	}
	// Descriptors free again: the loop accepts the waiting connections
	// and serves them (a 502: the handler's upstream is no address).
	if _, err := fmt.Fprintln(stdin, "raise"); err != nil {
		t.Fatal(err)
	}
	last := conns[len(conns)-1]
	_ = last.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(last, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(last), nil)
	if err != nil {
		t.Fatalf("a connection that waited in the backlog is not served once descriptors free: %v", err)
	}
	resp.Body.Close()
}

// fdLimitChild is the child's side: a loop, the descriptor limit, the
// count of turns once the parent's connections wait, then the limit
// raised again.
func fdLimitChild() {
	var turns atomic.Int64
	start := time.Now()
	clock := func() int64 {
		turns.Add(1)
		return int64(time.Since(start)) + 1
	}
	h := newHandler(netip.AddrPort{})
	s, err := New(Config{
		Addr: "127.0.0.1:0", Loops: 1, Handler: h,
		Fallback:      func(c net.Conn) { c.Close() },
		ErrorResponse: envelopeResponse,
		MaxHeadBytes:  4096, MaxHeaders: 32, MaxBodyBytes: 1 << 10, MaxIdlePerUpstream: 1,
		ReadTimeout: time.Minute, IdleTimeout: time.Minute, FirstByteTimeout: time.Minute,
		ReadIdleTimeout: time.Minute, IdleConnTTL: time.Minute, Clock: clock,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer s.Close()
	// The runtime's poller and its timers, which need descriptors of
	// their own, are set up before the limit.
	time.Sleep(time.Millisecond)
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// ReadDir's own descriptor is closed again: two accepts fit.
	lim := unix.Rlimit{Cur: uint64(len(open)) + 1, Max: uint64(len(open)) + 1}
	var old unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &old)
	lim.Max = old.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("addr", s.Addr())
	in := bufio.NewScanner(os.Stdin)
	in.Scan()                          // the parent's connections are made
	time.Sleep(200 * time.Millisecond) // the loop meets the limit
	n0 := turns.Load()
	time.Sleep(time.Second)
	fmt.Println("turns", turns.Load()-n0)
	in.Scan() // "raise"
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in.Scan() // until the parent is done
}
