package route

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// keptOpenAnswerer is a hostile backend that answers a request with a
// body over 64 KiB after reading its head only, and then neither reads
// the body nor closes: the proxy's write of the body stalls on a full
// socket. After that answer it waits until release is closed, then reads
// what the proxy left on the connection until the proxy closes it, and
// records that it did. A smaller request (the canary of a 5xx) is read
// whole and answered the same, on a connection kept alive.
type keptOpenAnswerer struct {
	ln      net.Listener
	release chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	heads  []string
	early  int // connections that carried an early answer
	closed int // of those, the ones the proxy closed
}

func startKeptOpenAnswerer(t *testing.T, status int, answer string) *keptOpenAnswerer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &keptOpenAnswerer{ln: ln, release: make(chan struct{})}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				defer c.Close()
				a.serve(c, status, answer)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		a.wg.Wait()
	})
	return a
}

func (a *keptOpenAnswerer) serve(c net.Conn, status int, answer string) {
	br := bufio.NewReader(c)
	for {
		var head strings.Builder
		cl := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.EqualFold(k, "content-length") {
				cl, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if line == "\r\n" {
				break
			}
		}
		a.mu.Lock()
		a.heads = append(a.heads, head.String())
		a.mu.Unlock()
		early := cl > 64<<10
		if !early {
			if _, err := io.CopyN(io.Discard, br, int64(cl)); err != nil {
				return
			}
		}
		fmt.Fprintf(c, "HTTP/1.1 %d Answered\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, len(answer), answer)
		if !early {
			continue
		}
		a.mu.Lock()
		a.early++
		a.mu.Unlock()
		<-a.release
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, br); err == nil || !isTimeout(err) {
			a.mu.Lock()
			a.closed++
			a.mu.Unlock()
		}
		return
	}
}

// counts returns how many requests with a head containing mark came, how
// many connections carried an early answer and how many of those the
// proxy closed.
func (a *keptOpenAnswerer) counts(mark string) (requests, early, closed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.heads {
		if strings.Contains(h, mark) {
			requests++
		}
	}
	return requests, a.early, a.closed
}

func (a *keptOpenAnswerer) url() string { return "http://" + a.ln.Addr().String() }

// A backend that answers before it has read the whole request and keeps
// the connection open (a 413 for a body over its own limit from a server
// that neither reads the rest nor closes) has answered: the client gets
// that answer at once, not after upstream.idle_timeout (the proxy's write
// of the body stalled on the full socket until its deadline, and the
// client got a 504 instead), the connection is never used for another
// exchange (the rest of the body would be read as the next request), and
// the answer counts against the breaker only if its status does.
func TestEarlyAnswerOnAKeptOpenConnection(t *testing.T) {
	for _, tc := range []struct {
		status  int
		breaker string
	}{
		{413, "closed"},
		{401, "closed"},
		{500, "open"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			answer := fmt.Sprintf(`{"error":"early %d"}`, tc.status)
			be := startKeptOpenAnswerer(t, tc.status, answer)
			cfg := testConfig(be.url())
			cfg.Upstream.IdleTimeout = config.Duration(time.Minute)
			cfg.Upstream.FirstByteTimeout = config.Duration(time.Minute)
			cfg.Breaker.OpenFor = config.Duration(time.Minute) // an opened breaker stays open to be seen
			tp := startProxy(t, cfg)
			body := strings.Repeat("x", 12<<20) // more than loopback's socket buffers hold
			mark := "Content-Length: " + fmt.Sprint(len(body))
			req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + mark + "\r\n\r\n" + body
			n := cfg.Breaker.ConsecutiveFailures
			for i := range n {
				start := time.Now()
				r := rawDo(t, tp.addr, req)
				d := time.Since(start)
				if r.status != tc.status || r.body != answer {
					t.Fatalf("request %d after %v: %d %q, want the backend's %d %q (breaker %s)", i, d, r.status, r.body, tc.status, answer, tp.DebugBackends()[0].Breaker)
				}
				t.Logf("request %d: %d after %v", i, r.status, d)
			}
			if got, early, _ := be.counts(mark); got != n || early != n {
				t.Errorf("the backend got %d requests and answered %d early, want %d: each on its own connection", got, early, n)
			}
			if tc.breaker == "open" {
				// A 5xx is judged by a canary, whose verdict may come
				// after the client has its answer (canary.go).
				waitUntil(t, 10*time.Second, func() bool { return tp.DebugBackends()[0].Breaker == "open" }, fmt.Sprintf("the breaker to open after %d early %d answers", n, tc.status))
			} else if st := tp.DebugBackends()[0].Breaker; st != tc.breaker {
				t.Errorf("breaker %s after %d early %d answers, want %s", st, n, tc.status, tc.breaker)
			}
			close(be.release)
			// Every connection that carried an early answer is closed.
			waitUntil(t, 10*time.Second, func() bool { _, _, c := be.counts(mark); return c == n }, "the proxy to close every connection that carried an early answer")
		})
	}
}
