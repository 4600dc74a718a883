//go:build linux

package evloop

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
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
				clk.keepMoving(t, 6*time.Second) // the accept may follow an advance
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

// parker parks every request whose target starts with /p (its ticket
// goes to tickets) and, when resumed, sends it to up; resumedAt hears the
// target of every Resumed call.
type parker struct {
	*hooks
	tickets   chan Ticket
	resumedAt chan string
}

func newParker(t *testing.T, up *testUpstream, timeout time.Duration, status int) *parker {
	p := &parker{hooks: newHooks(newHandler(up.addr())), tickets: make(chan Ticket, 16), resumedAt: make(chan string, 16)}
	p.route = func(r *Request, d *Decision) {
		if strings.HasPrefix(string(r.Target()), "/p") {
			*d = Decision{Park: true, ParkTimeout: timeout, ParkStatus: status, Tag: string(r.Target()), Set: d.Set[:0], Del: d.Del[:0]}
			p.tickets <- r.Ticket()
		}
	}
	p.resumed = func(r *Request, d *Decision) {
		if tag, _ := r.Tag().(string); tag != string(r.Target()) {
			t.Errorf("Resumed for %s with Tag %v", r.Target(), r.Tag())
		}
		p.resumedAt <- string(r.Target())
		d.Upstream = up.addr()
		d.Tag = r.Tag()
	}
	return p
}

func (p *parker) ticket(t *testing.T) Ticket {
	t.Helper()
	select {
	case tk := <-p.tickets:
		return tk
	case <-time.After(10 * time.Second):
		t.Fatal("no request parked")
	}
	return Ticket{}
}

// resumedNext returns the target of the next Resumed call.
func (p *parker) resumedNext(t *testing.T) string {
	t.Helper()
	select {
	case target := <-p.resumedAt:
		return target
	case <-time.After(10 * time.Second):
		t.Fatal("nothing resumed")
	}
	return ""
}

// A parked request waits without blocking its loop (another connection
// is served meanwhile, and ReadTimeout no longer applies to it), and a
// Resume from another goroutine sends it upstream with the decision
// Resumed makes; Done reports it once, with the parking decision's Tag.
// A retry Decision (from Done) may park too.
func TestParkAndResume(t *testing.T) {
	t.Run("resumed", func(t *testing.T) {
		up := startUpstream(t, nil)
		p := newParker(t, up, 30*time.Second, 0)
		clk := newFakeClock()
		s := startLoop(t, p, clk, nil)
		a := dial(t, s)
		a.send(post("/park", "1"))
		tk := p.ticket(t)
		clk.advance(6 * time.Second) // past ReadTimeout (5 s), within ParkTimeout
		b := dial(t, s)
		for i := range 2 {
			b.send(post("/b", strconv.Itoa(i)))
			if status, _, body := b.response(); status != 200 || string(body) != "ok:/b" {
				t.Fatalf("while parked: %d %q", status, body)
			}
			if res := p.result(t); res.Status != 200 {
				t.Fatalf("while parked: outcome %+v", res)
			}
		}
		up.next(t)
		up.next(t)
		go func() {
			if !s.Resume(tk) {
				t.Error("Resume refused")
			}
		}()
		if status, _, body := a.response(); status != 200 || string(body) != "ok:/park" {
			t.Fatalf("resumed: %d %q", status, body)
		}
		if got := p.resumedNext(t); got != "/park" {
			t.Fatalf("resumed %s", got)
		}
		if res := p.result(t); res.Status != 200 || res.Err != nil || res.Upstream != up.addr() || res.Attempt != 0 || res.Tag != "/park" {
			t.Fatalf("outcome %+v", res)
		}
		if r := up.next(t); r.path != "/park" {
			t.Fatalf("upstream got %s", r.path)
		}
		p.noneHeard(t)
	})
	t.Run("retry_parks", func(t *testing.T) {
		dead, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		deadAddr := addrOf(t, dead.Addr())
		dead.Close()
		up := startUpstream(t, nil)
		p := newParker(t, up, 30*time.Second, 0)
		p.route = func(_ *Request, d *Decision) { d.Upstream = deadAddr }
		p.retry = func(_ *Result, d *Decision) bool {
			d.Park, d.ParkTimeout, d.Tag = true, 30*time.Second, "/retry"
			return true
		}
		p.resumed = func(r *Request, d *Decision) {
			p.resumedAt <- r.Tag().(string)
			d.Upstream = up.addr()
		}
		h := &retryParker{parker: p}
		s := startLoop(t, h, newFakeClock(), nil)
		c := dial(t, s)
		c.send(post("/retry", "1"))
		if res := p.result(t); !errors.Is(res.Err, ErrConnect) {
			t.Fatalf("first attempt %+v", res)
		}
		s.Resume(<-h.tickets)
		if status, _, body := c.response(); status != 200 || string(body) != "ok:/retry" {
			t.Fatalf("after the parked retry: %d %q", status, body)
		}
		if got := p.resumedNext(t); got != "/retry" {
			t.Fatalf("resumed %s", got)
		}
		if res := p.result(t); res.Status != 200 || res.Attempt != 1 {
			t.Fatalf("second attempt %+v", res)
		}
	})
}

// retryParker passes the ticket of a Done call whose retry parks.
type retryParker struct {
	*parker
}

func (h *retryParker) Done(r *Request, res *Result, retry *Decision) bool {
	again := h.parker.Done(r, res, retry)
	if again && retry.Park {
		h.tickets <- r.Ticket()
	}
	return again
}

// A parked request ends without a decision when its ParkTimeout passes
// (the client gets ParkStatus, Done hears ErrParkTimeout) or its client
// hangs up (Done hears ErrClientGone, 499). A Resume after that, a
// Resume with the ticket of an earlier park on the same keep-alive
// connection, and one with the ticket of a connection whose descriptor
// a new connection now uses, all resume nothing: the next park is
// resumed only by its own ticket. (Tickets are queued in order, so once
// a sentinel parked after them is resumed, the stale ones were dropped.)
func TestStaleTicketsResumeNothing(t *testing.T) {
	up := startUpstream(t, nil)
	p := newParker(t, up, 2*time.Second, 503)
	clk := newFakeClock()
	s := startLoop(t, p, clk, nil)
	// stale resumes each stale ticket, then a sentinel's, and checks
	// that the sentinel is the only request resumed.
	stale := func(t *testing.T, tickets ...Ticket) {
		t.Helper()
		sentinel := dial(t, s)
		sentinel.send(post("/p-sentinel", "s"))
		st := p.ticket(t)
		for _, tk := range tickets {
			s.Resume(tk)
		}
		s.Resume(st)
		if got := p.resumedNext(t); got != "/p-sentinel" {
			t.Fatalf("a stale ticket resumed %s", got)
		}
		if status, _, _ := sentinel.response(); status != 200 {
			t.Fatalf("sentinel: %d", status)
		}
		if res := p.result(t); res.Status != 200 {
			t.Fatalf("sentinel: outcome %+v", res)
		}
		up.next(t)
	}

	t.Run("expired", func(t *testing.T) {
		c := dial(t, s)
		c.send(post("/p-expire", "1"))
		tk := p.ticket(t)
		clk.advance(3 * time.Second)
		status, hdr, body := c.response()
		if status != 503 || hdr.Get("Connection") != "close" {
			t.Fatalf("expired park: %d %v", status, hdr)
		}
		checkEnvelope(t, 503, body)
		c.closed()
		if res := p.result(t); !errors.Is(res.Err, ErrParkTimeout) || res.Status != 503 || res.Upstream.IsValid() || res.Tag != "/p-expire" {
			t.Fatalf("outcome %+v", res)
		}
		stale(t, tk)
		up.none(t)
	})
	t.Run("client_gone", func(t *testing.T) {
		c := dial(t, s)
		c.send(post("/p-gone", "1"))
		tk := p.ticket(t)
		c.c.Close()
		if res := p.result(t); !errors.Is(res.Err, ErrClientGone) || res.Status != 499 || res.Upstream.IsValid() {
			t.Fatalf("outcome %+v", res)
		}
		stale(t, tk)
		up.none(t)
	})
	t.Run("keep_alive", func(t *testing.T) {
		c := dial(t, s)
		c.send(post("/p-one", "1"))
		t1 := p.ticket(t)
		s.Resume(t1)
		if status, _, body := c.response(); status != 200 || string(body) != "ok:/p-one" {
			t.Fatalf("first park: %d %q", status, body)
		}
		p.resumedNext(t)
		p.result(t)
		up.next(t)
		stale(t, t1) // resumed already: its connection now idle
		c.send(post("/p-two", "2"))
		t2 := p.ticket(t)
		if t2.fd != t1.fd || t2.gen != t1.gen {
			t.Fatalf("tickets %+v and %+v are not of one connection", t1, t2)
		}
		stale(t, t1)
		s.Resume(t2)
		if status, _, body := c.response(); status != 200 || string(body) != "ok:/p-two" {
			t.Fatalf("second park: %d %q", status, body)
		}
		if got := p.resumedNext(t); got != "/p-two" {
			t.Fatalf("resumed %s", got)
		}
		p.result(t)
		up.next(t)
	})
	t.Run("reused_descriptor", func(t *testing.T) {
		sentinel := dial(t, s) // opened first, so its descriptor is not the reused one
		var t1, t2 Ticket
		var b *client
		for try := 0; ; try++ {
			a := dial(t, s)
			a.send(post("/p-a", "1"))
			t1 = p.ticket(t)
			a.c.Close()
			if res := p.result(t); !errors.Is(res.Err, ErrClientGone) {
				t.Fatalf("outcome %+v", res)
			}
			b = dial(t, s)
			b.send(post("/p-b", "2"))
			t2 = p.ticket(t)
			if t2.fd == t1.fd {
				break
			}
			if try == 5 {
				t.Fatalf("no descriptor reused in 6 tries (%d, %d)", t1.fd, t2.fd)
			}
			b.c.Close()
			p.result(t)
		}
		if t2.seq != t1.seq || t2.gen == t1.gen {
			t.Fatalf("tickets %+v, %+v", t1, t2)
		}
		sentinel.c.Close()
		stale(t, t1)
		s.Resume(t2)
		if status, _, body := b.response(); status != 200 || string(body) != "ok:/p-b" {
			t.Fatalf("the new connection's park: %d %q", status, body)
		}
		p.resumedNext(t)
		p.result(t)
		up.next(t)
	})
}

// refuseOnly hears refusals but cannot resume.
type refuseOnly struct {
	*testHandler
	refused chan Refusal
}

func (h *refuseOnly) Refused(rf *Refusal) { h.refused <- *rf }

// A Handler that parks without implementing Resumer gets a 500 and a
// refusal, never a request stuck until its ParkTimeout.
func TestParkWithoutResumerIsRefused(t *testing.T) {
	up := startUpstream(t, nil)
	h := &refuseOnly{testHandler: newHandler(up.addr()), refused: make(chan Refusal, 4)}
	h.route = func(_ *Request, d *Decision) { d.Park, d.ParkTimeout = true, time.Minute }
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	c.send(post("/a", "1"))
	status, _, body := c.response()
	if status != 500 {
		t.Fatalf("got %d", status)
	}
	checkEnvelope(t, 500, body)
	if rf := <-h.refused; rf.Status != 500 || rf.Cause != "park without a Resumer" {
		t.Fatalf("refusal %+v", rf)
	}
	up.none(t)
}

// Past Config.MaxConns a connection is accepted, answered 503 with the
// envelope, reported, and closed; once a served connection ends a new one
// is served. While as many connections are being refused as the cap, the
// loop stops accepting: a new connection waits unanswered in the backlog
// until a refused one ends, and is then answered.
func TestConnectionCap(t *testing.T) {
	up := startUpstream(t, nil)
	h := newHooks(newHandler(up.addr()))
	clk := newFakeClock()
	s := startLoop(t, h, clk, func(cfg *Config) { cfg.MaxConns = 2 })
	exchange := func(c *client, path string) int {
		t.Helper()
		c.send(post(path, "1"))
		status, _, body := c.response()
		if status == 200 {
			up.next(t)
			h.result(t)
		} else {
			checkEnvelope(t, status, body)
			if rf := h.refusal(t); rf.Status != 503 || rf.Cause != "connection cap" {
				t.Fatalf("refusal %+v", rf)
			}
		}
		return status
	}
	a, b := dial(t, s), dial(t, s)
	if exchange(a, "/a") != 200 || exchange(b, "/b") != 200 {
		t.Fatal("under the cap: refused")
	}
	// Two refused connections, held open by their clients (lingering):
	// as many as the cap, so the loop stops accepting.
	r1, r2 := dial(t, s), dial(t, s)
	for _, r := range []*client{r1, r2} {
		if status := exchange(r, "/over"); status != 503 {
			t.Fatalf("over the cap: %d", status)
		}
	}
	waiting := dial(t, s)
	waiting.send(post("/waiting", "1"))
	_ = waiting.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := waiting.br.Peek(1); err == nil {
		t.Fatalf("answered while the loop had stopped accepting: %q", n)
	}
	_ = waiting.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r1.c.Close() // a refused connection ends: the loop accepts again
	status, _, body := waiting.response()
	if status != 503 {
		t.Fatalf("after the pause: %d", status)
	}
	checkEnvelope(t, 503, body)
	if rf := h.refusal(t); rf.Status != 503 {
		t.Fatalf("refusal %+v", rf)
	}
	// The refused ones and a served one end: the next is served.
	r2.c.Close()
	waiting.c.Close()
	a.c.Close()
	for try := 0; ; try++ {
		c := dial(t, s)
		if exchange(c, "/next") == 200 {
			break
		}
		if try == 100 {
			t.Fatal("a connection ended, yet new ones are still refused")
		}
		time.Sleep(10 * time.Millisecond) // the loop has not seen a's close yet
	}
	up.none(t)
}

// Decision.Target replaces the request target upstream, and
// Result.BodyBytes counts the response body alone.
func TestDecisionTargetAndBodyBytes(t *testing.T) {
	up := startUpstream(t, nil)
	h := newHandler(up.addr())
	h.route = func(r *Request, d *Decision) {
		if string(r.Target()) == "/v1//completions?x=1" {
			d.Scratch = append(d.Scratch, "/v1/completions?x=1"...)
			d.Target = d.Scratch[len(d.Scratch)-len("/v1/completions?x=1"):]
		}
	}
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	c.send(post("/v1//completions?x=1", "{}"))
	if status, _, body := c.response(); status != 200 || string(body) != "ok:/v1/completions?x=1" {
		t.Fatalf("%d %q", status, body)
	}
	if r := up.next(t); r.path != "/v1/completions?x=1" {
		t.Fatalf("upstream got %s", r.path)
	}
	if res := h.result(t); res.BodyBytes != int64(len("ok:/v1/completions?x=1")) || res.ResponseBytes <= res.BodyBytes+20 {
		t.Fatalf("outcome %+v", res)
	}
}

// Shutdown closes the listener and the idle connections, lets a request
// at the upstream, one parked and one still being read finish, each
// answered with "Connection: close" and then closed, and returns once
// none is left. With its context done first it cuts what remains.
func TestShutdownDrains(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free()
		up := startUpstream(t, func(c net.Conn, n int, r upReq) bool {
			if r.path == "/slow" {
				<-release
			}
			return answerOK(c, n, r)
		})
		p := newParker(t, up, time.Minute, 0)
		s := startLoop(t, p, newFakeClock(), nil)
		idle, slow, parked, reading := dial(t, s), dial(t, s), dial(t, s), dial(t, s)
		idle.send(post("/idle", "1"))
		if status, _, _ := idle.response(); status != 200 {
			t.Fatalf("idle: %d", status)
		}
		up.next(t)
		slow.send(post("/slow", "1"))
		up.next(t)
		parked.send(post("/p-shut", "1"))
		tk := p.ticket(t)
		reading.send("POST /reading HTTP/1.1\r\nHost: x\r\n")
		// The partial head is read before Shutdown: another exchange on
		// the loop after it proves the loop has turned since.
		idle.send(post("/idle2", "1"))
		if status, _, _ := idle.response(); status != 200 {
			t.Fatalf("idle: %d", status)
		}
		up.next(t)

		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errc <- s.Shutdown(ctx)
		}()
		idle.closed()
		for try := 0; ; try++ {
			c, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				break
			}
			c.Close()
			if try == 1000 {
				t.Fatal("the listener stayed open")
			}
			time.Sleep(10 * time.Millisecond)
		}
		closing := func(c *client, want string) {
			t.Helper()
			status, hdr, body := c.response()
			if status != 200 || string(body) != want || hdr.Get("Connection") != "close" {
				t.Fatalf("%s: %d %v %q", want, status, hdr, body)
			}
			c.closed()
		}
		reading.send("Content-Length: 1\r\n\r\nx")
		closing(reading, "ok:/reading")
		s.Resume(tk)
		closing(parked, "ok:/p-shut")
		select {
		case err := <-errc:
			t.Fatalf("Shutdown returned %v with a request at the upstream", err)
		default:
		}
		free()
		closing(slow, "ok:/slow")
		if err := <-errc; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		for range 5 {
			if res := p.result(t); res.Status != 200 {
				t.Fatalf("outcome %+v", res)
			}
		}
	})
	t.Run("deadline", func(t *testing.T) {
		up, sawEOF := startSilentUpstream(t)
		s := startLoop(t, newHandler(up.addr()), newFakeClock(), nil)
		c := dial(t, s)
		c.send(post("/stuck", "1"))
		up.next(t)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- s.Shutdown(ctx) }()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v", err)
		}
		c.closed()
		<-sawEOF
	})
}
