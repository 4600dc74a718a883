//go:build linux

package route

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestPeekFD: the raw peek reports an idle socket as EAGAIN, unread bytes
// as a count without consuming them, and a peer close as 0 bytes and no
// error, never blocking.
func TestPeekFD(t *testing.T) {
	c, s := tcpPair(t)
	peek := func() (n int, err error) {
		rc, _ := c.(syscall.Conn).SyscallConn()
		buf := make([]byte, 1)
		_ = rc.Control(func(fd uintptr) { n, err = peekFD(fd, buf) })
		return n, err
	}
	if n, err := peek(); n != -1 || !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("idle socket: %d, %v; want -1, EAGAIN", n, err)
	}
	if _, err := s.Write([]byte("xy")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := peek()
		if n == 1 && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unread bytes: %d, %v; want 1, nil", n, err)
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 2)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); n != 2 || err != nil || string(buf) != "xy" {
		t.Fatalf("read after the peek: %d %v %q, want both bytes", n, err, buf)
	}
	s.Close()
	for {
		n, err := peek()
		if n == 0 && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer closed: %d, %v; want 0, nil", n, err)
		}
		time.Sleep(time.Millisecond)
	}
}
