package route

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// postFunc posts a JSON body and returns the response.
type postFunc func(t *testing.T, url, body string) *http.Response

// bothStreamPaths runs f over both ways a stream reaches a client: pumped
// over the hijacked connection (a keep-alive HTTP/1.1 client) and written
// by fasthttp (a client that asks to close the connection).
func bothStreamPaths(t *testing.T, f func(t *testing.T, post postFunc)) {
	t.Run("hijacked", func(t *testing.T) {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		f(t, func(t *testing.T, url, body string) *http.Response {
			t.Helper()
			resp, err := c.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("POST %s: %v", url, err)
			}
			return resp
		})
	})
	t.Run("fasthttp_writer", func(t *testing.T) { f(t, post) })
}

func streamPathName(hdr string) string {
	if hdr == "" {
		return "hijacked"
	}
	return "fasthttp_writer"
}

// readResponse reads one response from br, body included.
func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading a body: %v", err)
	}
	return resp, string(b)
}

// sseOrJSON answers {"stream":true} with a short SSE stream (frames
// frames, then [DONE]) and anything else with a small JSON body.
func sseOrJSON(frames int, gap time.Duration) http.HandlerFunc {
	sse := sseUpstream(frames, gap)
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			r.Body = io.NopCloser(strings.NewReader(""))
			sse(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}
}

// After a hijacked stream ends, its client connection serves the next
// requests (streams and not) as before: keep-alive is kept, and each
// response is whole and framed.
func TestHijackedStreamKeepsTheConnectionAlive(t *testing.T) {
	up := upstream(t, sseOrJSON(3, 10*time.Millisecond))
	tp := startProxy(t, testConfig(up.URL))
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, body := range []string{`{"stream":true}`, `{"stream":true}`, `{"x":1}`, `{"stream":true}`} {
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, got := readResponse(t, br)
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("request %d: status %d, close %v", i, resp.StatusCode, resp.Close)
		}
		if strings.Contains(body, "stream") {
			if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("Server") != "probegate" {
				t.Fatalf("request %d: headers %v, transfer encoding %v", i, resp.Header, resp.TransferEncoding)
			}
			if !strings.HasSuffix(got, "data: [DONE]\n\n") || strings.Count(got, "data: ") != 4 {
				t.Fatalf("request %d: stream %q", i, got)
			}
		} else if got != `{"ok":true}` {
			t.Fatalf("request %d: body %q", i, got)
		}
	}
	ftPoll(t, 2*time.Second, "every request settled as 200", func() bool {
		return tp.counter(t, "probegate_requests_total", map[string]string{"code": "200"}) == 4 && tp.inflight.Load() == 0
	})
}

// A stream whose client asked to close the connection (Connection: close,
// in any case, or among other tokens) is written by fasthttp, not pumped
// over the hijacked connection: the response says Connection: close and
// the proxy closes the connection after the stream's last chunk. The
// handler must read the client's wish before it strips the request's
// hop-by-hop fields (before, they were stripped first, so such streams
// were hijacked and the connection was kept open).
func TestStreamToAClosingClientIsNotHijacked(t *testing.T) {
	up := upstream(t, sseOrJSON(3, 10*time.Millisecond))
	tp := startProxy(t, testConfig(up.URL))
	for _, field := range []string{"Connection: close", "connection: Keep-Alive, CLOSE"} {
		conn, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"stream":true}`
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Length: %d\r\n\r\n%s", field, len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, got := readResponse(t, bufio.NewReader(conn))
		if resp.StatusCode != 200 || !strings.HasSuffix(got, "data: [DONE]\n\n") {
			t.Fatalf("%q: status %d, stream %q", field, resp.StatusCode, got)
		}
		if !resp.Close {
			t.Errorf("%q: the response does not say Connection: close (headers %v): the stream was hijacked", field, resp.Header)
		}
		// The proxy closes the connection after the stream: the next read
		// ends at once, not at the read deadline.
		t0 := time.Now()
		n, err := conn.Read(make([]byte, 1))
		if n != 0 || err == nil || isTimeout(err) {
			t.Errorf("%q: after the stream, read %d bytes, err %v after %v: want the connection closed", field, n, err, time.Since(t0))
		}
	}
}

// A request the client pipelined behind a stream's request (read by the
// server with it) is answered after the stream, on the same connection.
func TestHijackedStreamServesAPipelinedRequest(t *testing.T) {
	up := upstream(t, sseOrJSON(2, 10*time.Millisecond))
	tp := startProxy(t, testConfig(up.URL))
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, j := `{"stream":true}`, `{"x":1}`
	io.WriteString(conn, fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(s), s)+
		fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(j), j))
	br := bufio.NewReader(conn)
	if _, got := readResponse(t, br); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream %q", got)
	}
	if resp, got := readResponse(t, br); resp.StatusCode != 200 || got != `{"ok":true}` {
		t.Fatalf("pipelined request: %d %q", resp.StatusCode, got)
	}
}

// An idle hijacked stream holds no buffer: it waits for the next upstream
// chunk with a zero-length read, which the upstream body answers only once
// that chunk's size line arrived, and which waits without a buffer.
func TestIdleHijackedStreamHoldsNoBuffer(t *testing.T) {
	release := make(chan struct{})
	var sent atomic.Bool
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"i\":0}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		sent.Store(true)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	tp := startProxy(t, testConfig(up.URL))
	conn, br := openRawStream(t, tp.addr)
	defer conn.Close()
	// The first frame was written; the pump returns its buffer right
	// after, and the upstream body reader its own.
	ftPoll(t, 2*time.Second, "no buffer held while the stream is idle", func() bool {
		return pumpBufsHeld.Load() == 0 && bodyBufsHeld.Load() == 0
	})
	time.Sleep(50 * time.Millisecond)
	if n, m := pumpBufsHeld.Load(), bodyBufsHeld.Load(); n != 0 || m != 0 {
		t.Fatalf("an idle stream holds %d pump buffers and %d body buffers", n, m)
	}
	close(release)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after the upstream's last frame: %v", err)
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			break
		}
	}
	if !sent.Load() {
		t.Fatal("the last frame arrived before the upstream sent it")
	}
}

// The upstream body (upstreamTransport) returns from a zero-length Read
// only once the next chunk began, and holds no buffer while it waits (what
// the pump's wait relies on to hold none): its reads take a buffer only
// when the socket has bytes.
func TestZeroLengthReadWaitsForTheNextChunk(t *testing.T) {
	release := make(chan struct{})
	var sent atomic.Bool
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-release
		sent.Store(true)
		fmt.Fprint(w, "data: 2\n\n")
	})
	hc := newHostClient(strings.TrimPrefix(up.URL, "http://"), nil, testConfig(up.URL).Upstream, &connTable{}, zerolog.Nop())
	defer hc.CloseIdleConnections()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(up.URL + "/")
	if err := hc.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	body := resp.BodyStream()
	buf := make([]byte, 64)
	if n, err := body.Read(buf); err != nil || string(buf[:n]) != "data: 1\n\n" {
		t.Fatalf("first chunk %q, %v", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := body.Read(nil)
		done <- err
	}()
	select {
	case err := <-done:
		close(release)
		t.Fatalf("a zero-length read returned (%v) before the next chunk was sent", err)
	case <-time.After(100 * time.Millisecond):
	}
	held := bodyBufsHeld.Load()
	close(release)
	if err := <-done; err != nil || !sent.Load() {
		t.Fatalf("zero-length read: %v (chunk sent: %v)", err, sent.Load())
	}
	if held != 0 {
		t.Fatalf("a zero-length read waiting for the next chunk held %d body buffers", held)
	}
	if n, err := body.Read(buf); err != nil || string(buf[:n]) != "data: 2\n\n" {
		t.Fatalf("second chunk %q, %v", buf[:n], err)
	}
	_ = resp.CloseBodyStream()
}

// Shutdown closes at once a connection that waits for its next request
// after a hijacked stream, and returns without waiting for it.
func TestShutdownClosesAConnectionIdleAfterAStream(t *testing.T) {
	up := upstream(t, sseUpstream(1, 0))
	p, err := New(Options{Config: testConfig(up.URL)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = p.Serve(ln); close(served) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{\"stream\":true}")
	br := bufio.NewReader(conn)
	if _, got := readResponse(t, br); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream %q", got)
	}
	ftPoll(t, 2*time.Second, "the stream settled", func() bool { return p.inflight.Load() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v with only an idle connection open", d)
	}
	<-served
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection after Shutdown: %v, want EOF", err)
	}
}

// A hijacked stream that outlives the grace is cut: the client's
// connection closes, the upstream request is cancelled, the request is
// settled as 499 and Shutdown reports the cut.
func TestShutdownCutsHijackedStreamsAtTheGrace(t *testing.T) {
	upstreamGone := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamGone)
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := fmt.Fprint(w, "data: {}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	tp := startProxy(t, testConfig(up.URL))
	conn, br := openRawStream(t, tp.addr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := tp.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the grace's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v with a 300ms grace", d)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the client's stream after the cut: %v", err)
	}
	select {
	case <-upstreamGone:
	case <-time.After(3 * time.Second):
		t.Fatal("the upstream stream kept running after the cut")
	}
	ftPoll(t, 2*time.Second, "the cut stream settled as 499", func() bool {
		return tp.counter(t, "probegate_requests_total", map[string]string{"code": "499"}) == 1 && tp.inflight.Load() == 0
	})
}

// openRawStream sends a streaming completion on a raw connection to addr
// and reads up to the first SSE data frame.
func openRawStream(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{\"stream\":true}")
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			return conn, br
		}
	}
}
