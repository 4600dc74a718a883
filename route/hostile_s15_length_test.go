package route

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// lengthAnswer is the head of a non-stream answer framed by a
// Content-Length above maxBufferedBody, so it streams through bodyStream.
const lengthAnswerSize = 300000

func lengthAnswerHead() string {
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + itoa(lengthAnswerSize) + "\r\n\r\n"
}

// A length-framed answer above maxBufferedBody whose body fails before any
// byte of it reached the client is answered as a failure with nothing
// delivered: the 502 envelope with one backend, the whole answer of
// another backend when there is one (retried as after_head). fasthttp
// buffered the head and the first bytes in the connection's write buffer
// and closed the connection without flushing it when the next read
// failed: the client got an empty reply, not vLLM's envelope. A body that
// fails after more than the client connection's write buffer reached it
// ends as nginx ends it: the head, some of the body, and a close.
func TestLengthFramedAnswerFailingBeforeTheClientGotAByte(t *testing.T) {
	cut := func(sent int) func(c net.Conn, _ int, _ []byte) bool {
		return func(c net.Conn, _ int, _ []byte) bool {
			_, _ = io.WriteString(c, lengthAnswerHead()+`{"x":"`+strings.Repeat("a", sent))
			return false // close: the body is cut short
		}
	}
	whole := func(c net.Conn, _ int, _ []byte) bool {
		_, err := io.WriteString(c, lengthAnswerHead()+`{"x":"`+strings.Repeat("b", lengthAnswerSize-8)+`"}`)
		return err == nil
	}
	const req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"

	t.Run("one backend", func(t *testing.T) {
		for _, sent := range []int{0, 100, 3000} {
			be := startRawBackend(t, cut(sent))
			tp := startProxy(t, testConfig(be.url()))
			r := rawDo(t, tp.addr, req)
			if r.status != 502 || !strings.Contains(r.body, `"code":502`) {
				t.Fatalf("body cut after %d bytes: %d %q, want the 502 envelope (0: an empty reply)", sent+6, r.status, r.body)
			}
		}
	})
	t.Run("retried on another backend", func(t *testing.T) {
		bad := startRawBackend(t, cut(100))
		good := startRawBackend(t, whole)
		cfg := testConfig(bad.url(), good.url())
		cfg.Breaker.ConsecutiveFailures = 100
		tp := startProxy(t, cfg)
		for i := 0; len(bad.requests()) == 0; i++ {
			if i == 30 {
				t.Fatal("the failing backend was never picked")
			}
			r := rawDo(t, tp.addr, req)
			if r.status != 200 || len(r.body) != lengthAnswerSize {
				t.Fatalf("request %d: %d with %d body bytes, want 200 and the other backend's %d", i, r.status, len(r.body), lengthAnswerSize)
			}
		}
	})
	t.Run("pipelined after an answer", func(t *testing.T) {
		// The first answer waits in the write buffer for the pipelined
		// second: the second's failure dropped both.
		be := startRawBackend(t, func(c net.Conn, n int, head []byte) bool {
			if bytes.HasPrefix(head, []byte("GET ")) {
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
				return err == nil
			}
			return cut(100)(c, n, head)
		})
		tp := startProxy(t, testConfig(be.url()))
		br := sendRaw(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"+req)
		for i, want := range []int{200, 502} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("answer %d: %v, want %d", i, err, want)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("answer %d: %d, want %d", i, resp.StatusCode, want)
			}
		}
	})
	t.Run("cut after the client got bytes", func(t *testing.T) {
		be := startRawBackend(t, cut(3*4096))
		tp := startProxy(t, testConfig(be.url()))
		resp, err := http.ReadResponse(sendRaw(t, tp.addr, req), nil)
		if err != nil {
			t.Fatalf("no head: %v", err)
		}
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || err == nil || len(b) == 0 || len(b) >= lengthAnswerSize {
			t.Fatalf("%d, %d body bytes, %v: want 200, a body cut short, and an error", resp.StatusCode, len(b), err)
		}
	})
}

// sendRaw writes req on a fresh connection, closed at the test's end, and
// returns a reader of what comes back.
func sendRaw(t *testing.T, addr, req string) *bufio.Reader {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return bufio.NewReader(c)
}
