//go:build linux

package evloop

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hooks is a test Handler with every optional interface: it hears the
// loop's refusals, and head and resumed, when set, serve Head and Resumed.
type hooks struct {
	*testHandler
	refused chan Refusal
	head    func(r *Request, h *ResponseHead, retry *Decision) bool
	resumed func(r *Request, d *Decision)
}

func newHooks(h *testHandler) *hooks {
	return &hooks{testHandler: h, refused: make(chan Refusal, 64)}
}

func (h *hooks) Refused(rf *Refusal) { h.refused <- *rf }

func (h *hooks) Head(r *Request, rh *ResponseHead, retry *Decision) bool {
	if h.head == nil {
		return false
	}
	return h.head(r, rh, retry)
}

func (h *hooks) Resumed(r *Request, d *Decision) {
	if h.resumed != nil {
		h.resumed(r, d)
	}
}

func (h *hooks) refusal(t *testing.T) Refusal {
	t.Helper()
	select {
	case rf := <-h.refused:
		return rf
	case <-time.After(10 * time.Second):
		t.Fatal("no refusal reported")
	}
	return Refusal{}
}

// noneHeard fails if the handler heard an outcome or a refusal.
func (h *hooks) noneHeard(t *testing.T) {
	t.Helper()
	select {
	case rf := <-h.refused:
		t.Fatalf("refusal reported: %+v", rf)
	case res := <-h.done:
		t.Fatalf("outcome reported: %+v", res)
	default:
	}
}

// Every refusal the loop makes on its own is reported once through
// RefusalHandler with the status the client got; a refusal the Handler
// made (Decision.Status) is not.
func TestLoopRefusalsAreReported(t *testing.T) {
	cases := []struct {
		name, req string
		status    int
		cause     string
	}{
		{"malformed", "GET / HTTP/1.1\nHost: x\n\n", 400, "malformed request"},
		{"body over the limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n", 413, "body too large"},
		{"head over the limit", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 5000) + "\r\n\r\n", 431, "head too large"},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP version not supported"},
		{"slow head", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n", 408, "read timeout"},
		{"handler refuses", post("/v1/nope", "{}"), 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, nil)
			h := newHooks(newHandler(up.addr()))
			h.route = func(r *Request, d *Decision) {
				if string(r.Target()) == "/v1/nope" {
					d.Status = 404
				}
			}
			clk := newFakeClock()
			s := startLoop(t, h, clk, nil)
			c := dial(t, s)
			c.send(tc.req)
			if tc.status == 408 {
				stop := make(chan struct{})
				defer close(stop)
				go func() { // the accept may follow an advance: keep time moving
					for {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond):
							clk.advance(6 * time.Second)
						}
					}
				}()
			}
			status, _, body := c.response()
			if status != tc.status {
				t.Fatalf("got %d, want %d", status, tc.status)
			}
			checkEnvelope(t, tc.status, body)
			c.closed()
			if tc.cause == "" {
				h.noneHeard(t)
				return
			}
			if rf := h.refusal(t); rf.Status != tc.status || rf.Cause != tc.cause || rf.Remote.Addr().String() != "127.0.0.1" {
				t.Fatalf("refusal reported as %+v", rf)
			}
			h.noneHeard(t)
		})
	}
}

// A Handler's own answer (Decision.Response) keeps the connection: the
// next request on it is served, and nothing reached the upstream for the
// answered one, nor was Done called. With Decision.Close, or a client
// that asked to close, the answer carries "Connection: close" and the
// connection ends after it.
func TestHandlerAnswerKeepsTheConnection(t *testing.T) {
	const body404 = `{"error":{"message":"no route","type":"NotFoundError","param":null,"code":404}}`
	answer := []byte("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body404)) + "\r\n\r\n" + body404)
	up := startUpstream(t, nil)
	h := newHooks(newHandler(up.addr()))
	h.route = func(r *Request, d *Decision) {
		switch string(r.Target()) {
		case "/nope":
			d.Response = answer
		case "/nope-close":
			d.Response, d.Close = answer, true
		}
	}
	s := startLoop(t, h, newFakeClock(), nil)

	c := dial(t, s)
	c.send(post("/nope", "{}") + post("/a", "1"))
	status, hdr, body := c.response()
	if status != 404 || string(body) != body404 || hdr.Get("Connection") != "" {
		t.Fatalf("answer: %d %v %q", status, hdr, body)
	}
	if status, _, body := c.response(); status != 200 || string(body) != "ok:/a" {
		t.Fatalf("after the answer: %d %q", status, body)
	}
	if r := up.next(t); r.path != "/a" {
		t.Fatalf("upstream got %s", r.path)
	}
	if res := h.result(t); res.Status != 200 {
		t.Fatalf("outcome %+v", res)
	}
	h.noneHeard(t) // no Done for the answered request
	up.none(t)

	for _, tc := range []struct{ req, name string }{
		{post("/nope-close", "{}"), "Decision.Close"},
		{post("/nope", "{}", "Connection: close\r\n"), "the client's Connection: close"},
	} {
		c := dial(t, s)
		c.send(tc.req)
		status, hdr, body := c.response()
		if status != 404 || string(body) != body404 || hdr.Get("Connection") != "close" {
			t.Fatalf("%s: %d %v %q", tc.name, status, hdr, body)
		}
		c.closed()
	}
	h.noneHeard(t)
	up.none(t)
}

// HeadHandler sees the upstream head before the client does: it reads a
// header case-insensitively, its edits shape the client's head, and a
// discarded 503 never reaches the client: the request is re-sent to
// another upstream and Done reports both attempts. The discarded
// response's connection, whose body came with its head, is pooled and
// reused; one whose body had not all arrived is closed.
func TestHeadHookReadsEditsAndResends(t *testing.T) {
	const busy = `{"error":"busy"}`
	reports := make(chan string, 16)
	for _, shape := range []string{"whole body", "partial body"} {
		t.Run(shape, func(t *testing.T) {
			stall := make(chan struct{})
			defer close(stall)
			first := startUpstream(t, func(c net.Conn, _ int, r upReq) bool {
				if r.path == "/again" {
					return answerOK(c, 0, r)
				}
				head := "HTTP/1.1 503 Service Unavailable\r\nEndpoint-Load-Metrics: TEXT queue=9\r\nContent-Length: " + strconv.Itoa(len(busy)) + "\r\n\r\n"
				if shape == "whole body" {
					_, _ = io.WriteString(c, head+busy)
					return true
				}
				_, _ = io.WriteString(c, head+busy[:3])
				var b [1]byte
				_, _ = c.Read(b[:]) // EOF: the loop closed it
				<-stall
				return false
			})
			second := startUpstream(t, func(c net.Conn, _ int, r upReq) bool {
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Request-Id: backend-id\r\nendpoint-load-metrics: TEXT queue=1\r\nX-Keep: k\r\nContent-Length: 2\r\n\r\nok")
				return err == nil
			})
			h := newHooks(newHandler(first.addr()))
			h.head = func(r *Request, rh *ResponseHead, retry *Decision) bool {
				reports <- string(rh.Header("ENDPOINT-load-METRICS"))
				if rh.Status == 503 && string(r.Target()) != "/again" {
					retry.Upstream = second.addr()
					return true
				}
				rh.Del = append(rh.Del, "Endpoint-Load-Metrics")
				rh.Set = append(rh.Set, Header{Name: "X-Request-Id", Value: []byte("client-id")})
				return false
			}
			s := startLoop(t, h, newFakeClock(), nil)
			c := dial(t, s)
			c.send(post("/a", "1"))
			status, hdr, body := c.response()
			if status != 200 || string(body) != "ok" || hdr.Get("X-Request-Id") != "client-id" ||
				len(hdr.Values("X-Request-Id")) != 1 || hdr.Get("Endpoint-Load-Metrics") != "" || hdr.Get("X-Keep") != "k" {
				t.Fatalf("client got %d %v %q", status, hdr, body)
			}
			if a, b := <-reports, <-reports; a != "TEXT queue=9" || b != "TEXT queue=1" {
				t.Fatalf("Head read %q, %q", a, b)
			}
			r1, r2 := h.result(t), h.result(t)
			if !errors.Is(r1.Err, ErrDiscarded) || r1.Status != 503 || r1.Upstream != first.addr() || r1.Attempt != 0 || r1.FirstByte == 0 {
				t.Fatalf("discarded attempt %+v", r1)
			}
			if r2.Err != nil || r2.Status != 200 || r2.Upstream != second.addr() || r2.Attempt != 1 {
				t.Fatalf("second attempt %+v", r2)
			}
			first.next(t)
			second.next(t)
			// The next request to the first upstream: on the pooled
			// connection after a whole body, on a new one otherwise.
			c.send(post("/again", "2"))
			if status, _, body := c.response(); status != 200 || string(body) != "ok:/again" {
				t.Fatalf("again: %d %q", status, body)
			}
			<-reports
			want := map[string]int{"whole body": 1, "partial body": 2}[shape]
			if r := first.next(t); r.conn != want {
				t.Fatalf("after a discarded %s the next request went on upstream connection %d, want %d", shape, r.conn, want)
			}
		})
	}
}
