package route

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
)

// countingListener hands out connections that count the bytes the proxy
// read from them. They hide the socket's file descriptor (no
// syscall.Conn), so every read of the proxy goes through countingConn.Read.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// CloseWrite keeps the lingering close's FIN (linger.go).
func (c *countingConn) CloseWrite() error {
	return c.Conn.(*net.TCPConn).CloseWrite()
}

// startCountingProxy is startProxy with a countingListener: read counts
// what the proxy read from its client connections.
func startCountingProxy(t *testing.T, cfgRead time.Duration, read *atomic.Int64) *testProxy {
	t.Helper()
	c := testConfig(deadAddr(t))
	c.Route.AllowPaths = config.DefaultAllowPaths
	c.Server.MaxBodyBytes = 8 << 20
	c.Server.ReadTimeout = config.Duration(cfgRead)
	reg := prometheus.NewRegistry()
	p, err := New(Options{Config: c, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return serveProxy(t, p, reg, func(ln net.Listener) net.Listener {
		return countingListener{Listener: ln, read: read}
	})
}

// A request the proxy refuses on its head is refused before its body is
// read: a client that sends the head and the first KiB of a 4 MiB body,
// then stalls, gets the refusal (vLLM's envelope, Connection: close) at
// once, not at server.read_timeout (a minute here); and when it then sends
// the rest of its body, the proxy reads at most lingerMaxBytes of it
// (the lingering close that lets the client read the refusal) before it
// closes, not the 4 MiB a forwarded request could take. Cases: a path
// route.allow_paths refuses (404), a method it refuses on an allowed
// path (405, with Allow), a body on GET (400), a refused path with a
// chunked body (404), and a smuggling framing (400).
//
// Without the head's verdict (Server.HeaderReceived unset, or
// headReceived returning no limit) the client waits for its answer until
// its 10 s bound and the test fails there.
func TestRefusalOnTheHeadReadsNoBody(t *testing.T) {
	const body = 4 << 20
	const first = 1 << 10
	cases := []struct {
		name   string
		head   string
		status int
		allow  bool
	}{
		{"404 path", "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: " + itoa(body) + "\r\n\r\n", 404, false},
		{"405 method", "PUT /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: " + itoa(body) + "\r\n\r\n", 405, true},
		{"400 body on GET", "GET /v1/models HTTP/1.1\r\nHost: a\r\nContent-Length: " + itoa(body) + "\r\n\r\n", 400, false},
		{"404 chunked", "POST /sleep?level=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(body, 16) + "\r\n", 404, false},
		{"400 framing", "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: " + itoa(body) + "\r\nTransfer-Encoding: identity\r\n\r\n", 400, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var read atomic.Int64
			tp := startCountingProxy(t, time.Minute, &read)
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.head+strings.Repeat("y", first)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body stalls: %v", err)
			}
			msg := envelope(t, resp, tc.status)
			if !resp.Close {
				t.Errorf("%q: the connection stays open with the body unread", msg)
			}
			if got := resp.Header.Get("Allow"); (got != "") != tc.allow {
				t.Errorf("Allow %q", got)
			}
			// The rest of the body: the proxy discards what its lingering
			// close allows, then closes (the write fails from then on).
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			rest := bytes.Repeat([]byte("y"), 64<<10)
			for sent := first; sent < body; sent += len(rest) {
				if _, err := c.Write(rest); err != nil {
					break
				}
			}
			_, _ = io.Copy(io.Discard, br) // until the proxy's close
			// The head, what came with it, and the linger's share; a
			// forwarded request would have taken all 4 MiB.
			t.Logf("%d: the proxy read %d bytes (head %d)", tc.status, read.Load(), len(tc.head))
			if n := read.Load(); n > int64(len(tc.head)+first+lingerMaxBytes+(64<<10)) {
				t.Errorf("the proxy read %d bytes of a refused request (head %d, linger bound %d)", n, len(tc.head), lingerMaxBytes)
			}
		})
	}
}

// BenchmarkHeadReceived is what the head's verdict costs a forwarded
// request with a body (an OpenAI client's chat completion head, the
// default route.allow_paths): the hook judges it once before the body
// is read, and Handle again after (judgeHead).
func BenchmarkHeadReceived(b *testing.B) {
	c := testConfig("http://127.0.0.1:1")
	c.Route.AllowPaths = config.DefaultAllowPaths
	p, err := New(Options{Config: c})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var h fasthttp.RequestHeader
	raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw.example\r\nUser-Agent: OpenAI/Python 1.54.3\r\n" +
		"Accept: application/json\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-x\r\n" +
		"X-Stainless-Lang: python\r\nContent-Length: 180\r\n\r\n"
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if rc := p.headReceived(&h); rc.MaxRequestBodySize != 0 {
			b.Fatal("refused")
		}
	}
}
