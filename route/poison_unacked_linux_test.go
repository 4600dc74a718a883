package route

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// resetOnReuse is a raw upstream that answers the first reuseRounds
// completions on each connection and, when the next one arrives on it,
// resets the connection (SO_LINGER 0) without reading it: what a server that closed
// an idle keep-alive connection as the request was on its way looks like
// to the proxy (the request is answered with a reset; the proxy's check
// before the reuse found the socket quiet). resets counts those.
type resetOnReuse struct {
	// fin: read the whole request and close normally instead (FIN, which
	// carries the acknowledgement): a process that took the request and
	// died, as a poison body makes it.
	fin    bool
	mu     sync.Mutex
	served map[net.Conn]int
	resets int
}

// reuseRounds is how many completions resetOnReuse answers on a
// connection: enough exchanges for its TCP to delay its acknowledgements
// (Linux's ping-pong mode, entered after 1 to 3 of them by kernel
// version), as on any busy keep-alive connection.
const reuseRounds = 4

func (r *resetOnReuse) respond(c net.Conn, _ int, head []byte) bool {
	_, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"choices\":[{\"text\":\"ok\"}]}"))
	if err != nil {
		return false
	}
	if !bytes.HasPrefix(head, []byte("POST /v1/completions ")) {
		return true // the proxy's own requests, if any
	}
	r.mu.Lock()
	if r.served == nil {
		r.served = map[net.Conn]int{}
	}
	r.served[c]++
	k := r.served[c]
	r.mu.Unlock()
	if k < reuseRounds {
		return true
	}
	// Wait for the next request's first byte, leave the rest unread, and
	// reset: the server's TCP had not acknowledged the request (its ACK
	// was still delayed) when the reset went out.
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(b[:]); err != nil {
		return false
	}
	if r.fin {
		time.Sleep(20 * time.Millisecond) // the rest of the request is in
		buf := make([]byte, 64<<10)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		r.mu.Lock()
		r.resets++
		r.mu.Unlock()
		return false // serve closes it: a FIN
	}
	r.mu.Lock()
	r.resets++
	r.mu.Unlock()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return false // serve closes it: a reset
}

// Three pods that reset a reused connection when a request arrives on it,
// upstream.retries 3: a request meets such a reset on each pod in turn.
// The pods' TCP never acknowledged it, so it was never delivered: no drop
// of the poison rule (poison.go). Each reset spends a retry (a backend
// that read a request and reset may have crashed on it), and the last one
// goes to a fresh connection: the request is answered, and so is the same
// body again. Counted as drops (any reset on a reused connection), the
// first two made it "dropped twice in a row": 502 and a poison verdict on
// a legitimate body.
func TestUnacknowledgedResetsAreNotPoisonDrops(t *testing.T) {
	pods, tp, url, body := startResetOnReuseFleet(t, false)
	for i := range 2 {
		if code := postStatus(t, url, body); code != 200 {
			t.Fatalf("request %d meeting resets on reuse: %d, want 200 (poison verdicts %v)", i, code,
				tp.counter(t, "probegate_poison_requests_total", nil))
		}
	}
	if got := tp.counter(t, "probegate_poison_requests_total", nil); got != 0 {
		t.Errorf("poison_requests_total = %v after resets of undelivered requests, want 0", got)
	}
	n := totalResets(pods)
	if n < 2 {
		t.Errorf("%d resets on reuse: the test did not exercise two", n)
	}
}

// The other side of the distinction: pods that read the whole request on
// a reused connection and then close it (FIN: their TCP acknowledged it)
// dropped a delivered request. Two such drops in a row are the poison
// rule's: 502, one poison verdict, and the third pod never sees it.
func TestAcknowledgedDropsOnReuseStillCount(t *testing.T) {
	pods, tp, url, body := startResetOnReuseFleet(t, true)
	if code := postStatus(t, url, body); code != 502 {
		t.Fatalf("a request two pods took and dropped: %d, want 502", code)
	}
	if got := tp.counter(t, "probegate_poison_requests_total", nil); got != 1 {
		t.Errorf("poison_requests_total = %v, want 1", got)
	}
	n := totalResets(pods)
	if n != 2 {
		t.Errorf("%d pods dropped the request, want 2", n)
	}
}

// startResetOnReuseFleet starts three resetOnReuse pods (fin as given)
// behind a round_robin proxy with upstream.retries 3 and retry_on_reset,
// and sends 3 x reuseRounds completions: one pooled connection on each pod,
// whose next request meets the reset (or the FIN). It returns the pods,
// the proxy, the completions URL and the body sent.
func startResetOnReuseFleet(t *testing.T, fin bool) ([]*resetOnReuse, *testProxy, string, string) {
	t.Helper()
	var pods []*resetOnReuse
	var urls []string
	for range 3 {
		r := &resetOnReuse{fin: fin}
		u := startRawBackend(t, r.respond)
		pods, urls = append(pods, r), append(urls, u.url())
	}
	cfg := testConfig(urls...)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.Retries = 3
	cfg.Upstream.RetryOnReset = true
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	body := `{"model":"m","prompt":"fine"}`
	for i := range 3 * reuseRounds {
		if code := postStatus(t, url, body); code != 200 {
			t.Fatalf("warm-up request %d: %d", i, code)
		}
	}
	return pods, tp, url, body
}

// totalResets is how many resets (or FIN drops) the pods made.
func totalResets(pods []*resetOnReuse) int {
	n := 0
	for _, r := range pods {
		r.mu.Lock()
		n += r.resets
		r.mu.Unlock()
	}
	return n
}
