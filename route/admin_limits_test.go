package route

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is a net.Listener whose connections are net.Pipe ends
// (dial), so that an http.Server runs inside a synctest bubble.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	done      chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

// Every wait of the admin listener is bounded (AdminServer): a peer that
// keeps a connection alive and idle, trickles its head or a body, or never
// reads the answer is cut, in (virtual) minutes, where the admin listener
// held it for as long as the peer liked with only a header timeout. A
// long answer (a 30 s CPU profile) is cut by none of the bounds: not by
// the read timeout, shorter than it, either.
func TestAdminListenerBoundsEveryWait(t *testing.T) {
	big := strings.Repeat("m", 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, big) })
	mux.HandleFunc("GET /debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		select { // as pprof.Profile waits out its seconds
		case <-time.After(30 * time.Second):
			io.WriteString(w, "profile\n")
		case <-r.Context().Done():
		}
	})
	const bound = adminWriteTimeout + adminIdleTimeout // the longest a wait may take
	cases := []struct {
		name string
		peer func(t *testing.T, c net.Conn)
	}{
		{"idle after a request", func(t *testing.T, c net.Conn) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
			buf := make([]byte, 512)
			if n, _ := c.Read(buf); !strings.Contains(string(buf[:n]), "ok\n") {
				t.Fatalf("answer %q", buf[:n])
			}
		}},
		{"head trickled", func(t *testing.T, c net.Conn) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\n")
			for range 100 {
				time.Sleep(time.Second)
				if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
					return
				}
			}
		}},
		{"body trickled", func(t *testing.T, c net.Conn) {
			io.WriteString(c, "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
			go io.Copy(io.Discard, c) // the 405, then EOF
			for range 100000 {
				time.Sleep(time.Second)
				if _, err := io.WriteString(c, "x"); err != nil {
					return
				}
			}
		}},
		{"answer never read", func(t *testing.T, c net.Conn) {
			io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
			time.Sleep(bound)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ln := newPipeListener()
				srv := AdminServer(mux)
				served := make(chan struct{})
				go func() { srv.Serve(ln); close(served) }()
				c := ln.dial()
				start := time.Now()
				tc.peer(t, c)
				// The server must close the connection: reads then end.
				c.SetReadDeadline(start.Add(bound + time.Hour))
				_, err := io.Copy(io.Discard, c)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Errorf("the connection is still open %v after it started", time.Since(start))
				} else if d := time.Since(start); d > bound+time.Second {
					t.Errorf("closed after %v, want within %v", d, bound)
				}
				c.Close()
				srv.Close()
				<-served
			})
		})
	}
	t.Run("a 30 s profile is not cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ln := newPipeListener()
			srv := AdminServer(mux)
			served := make(chan struct{})
			go func() { srv.Serve(ln); close(served) }()
			c := ln.dial()
			io.WriteString(c, "GET /debug/pprof/profile HTTP/1.1\r\nHost: a\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(time.Minute))
			buf := make([]byte, 512)
			n, _ := io.ReadAtLeast(c, buf, 1)
			for n < len(buf) && !strings.Contains(string(buf[:n]), "profile\n") {
				m, err := c.Read(buf[n:])
				n += m
				if err != nil {
					break
				}
			}
			if !strings.Contains(string(buf[:n]), "profile\n") {
				t.Errorf("a 30 s answer got %q", buf[:n])
			}
			c.Close()
			srv.Close()
			<-served
		})
	})
}
