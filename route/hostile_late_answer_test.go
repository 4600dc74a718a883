package route

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// An answer a backend sends late in a long stalled upload (it read the
// head, then neither read the body nor closed, and answered 413 seconds
// later) reaches the client within maxStallLook (320 ms) of being sent,
// plus scheduling slack: the stalled write looks for an answer after 20
// ms, then after waits that double up to maxStallLook, never longer. The
// answer comes 2.6 s into the stall, where waits that kept doubling (20,
// 40, ... 2,560 ms) would next look at 5.1 s, 2.5 s late; without the
// look at all, the write waits for upstream.idle_timeout (a minute here)
// and the client gets a 504. Real sockets: the look peeks the TCP socket,
// which testing/synctest's net.Pipe has none of; the bound (1 s) is three
// times maxStallLook to hold on a loaded machine, and still fails either
// way the mechanism breaks.
func TestLateAnswerInAStalledUploadReachesTheClientWithinTheLookBound(t *testing.T) {
	const answerAfter = 2600 * time.Millisecond
	const bound = time.Second
	answer := `{"error":"late 413"}`
	var sentAt atomic.Int64 // when the backend wrote its answer, Unix ns
	release := make(chan struct{})
	be := startRawListener(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		time.Sleep(answerAfter) // the body stalls in the socket buffers
		sentAt.Store(time.Now().UnixNano())
		fmt.Fprintf(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
		<-release
	})
	defer close(release)
	cfg := testConfig("http://" + be.Addr().String())
	cfg.Upstream.IdleTimeout = config.Duration(time.Minute)
	cfg.Upstream.FirstByteTimeout = config.Duration(time.Minute)
	tp := startProxy(t, cfg)

	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := strings.Repeat("x", 12<<20) // more than loopback's socket buffers hold
	go func() {
		_, _ = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body)
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	got := time.Now()
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if !strings.HasPrefix(status, "HTTP/1.1 413") {
		t.Fatalf("status %q, want the backend's 413", status)
	}
	sent := sentAt.Load()
	if sent == 0 {
		t.Fatal("a 413 reached the client before the backend sent one")
	}
	if d := got.Sub(time.Unix(0, sent)); d > bound {
		t.Fatalf("the answer reached the client %v after the backend sent it, %v into a stalled upload; want within %v (maxStallLook %v plus slack)", d, answerAfter, bound, maxStallLook)
	} else {
		t.Logf("the answer reached the client %v after the backend sent it", d)
	}
}

// startRawListener accepts connections on loopback and hands each to
// serve on its own goroutine, closing it when serve returns; everything
// stops at cleanup.
func startRawListener(t *testing.T, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan struct{}, 64)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- struct{}{}
			go func() {
				defer func() { <-conns }()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for range cap(conns) {
			conns <- struct{}{} // every serve has returned
		}
	})
	return ln
}
