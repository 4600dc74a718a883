package route

import (
	"bytes"
	"encoding/json"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// okResponder answers every request 200 with a small JSON body and the
// extra raw header lines given.
func okResponder(extra string) func(c net.Conn, n int, head []byte) bool {
	return func(c net.Conn, _ int, _ []byte) bool {
		_, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n" + extra + "\r\n{}"))
		return err == nil
	}
}

// Header names are case-insensitive (RFC 9110 section 5.1): hop-by-hop
// headers, those listed in Connection, X-Request-Id, X-Forwarded-For and
// the ORCA request header are recognized in any case, on the way in and
// on the way out.
func TestHeaderNamesAreCaseInsensitive(t *testing.T) {
	be := startRawBackend(t, okResponder(
		"connection: x-private\r\nx-private: p\r\nKEEP-ALIVE: timeout=5\r\nupgrade: h2c\r\n"+
			"proxy-authenticate: Basic\r\nendpoint-load-metrics: TEXT named_metrics.kv_cache_usage_perc=0.5\r\n"+
			"x-request-id: someone-else\r\nx-kept: yes\r\n"))
	cfg := testConfig(be.url())
	cfg.Route.Policy = "cached" // ORCA is asked for under the policies that read reports
	tp := startProxy(t, cfg)

	body := `{"model":"m","prompt":"hi"}`
	req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" +
		"connection: keep-alive, x-secret\r\nx-secret: s\r\nte: trailers\r\nkeep-alive: 5\r\n" +
		"proxy-authorization: Basic c2VjcmV0\r\nupgrade: websocket\r\nPROXY-CONNECTION: keep-alive\r\n" +
		"x-request-id: victim-id\r\nx-forwarded-for: 6.6.6.6\r\nendpoint-load-metrics-format: JSON\r\n" +
		"x-kept: yes\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	r := rawDo(t, tp.addr, req)
	if r.status != 200 {
		t.Fatalf("status %d, body %q", r.status, r.body)
	}
	heads := be.requests()
	if len(heads) != 1 {
		t.Fatalf("backend got %d requests", len(heads))
	}
	h := heads[0]
	for _, name := range []string{"x-secret", "te", "keep-alive", "proxy-authorization", "upgrade", "proxy-connection", "trailer"} {
		if vs := headerValues(h, name); len(vs) != 0 {
			t.Errorf("hop-by-hop %q reached the backend: %q", name, vs)
		}
	}
	for _, v := range headerValues(h, "connection") {
		if !strings.EqualFold(v, "close") && !strings.EqualFold(v, "keep-alive") {
			t.Errorf("the client's Connection reached the backend: %q", v)
		}
	}
	if vs := headerValues(h, "x-request-id"); len(vs) != 1 || !isUpstreamIDOf(vs[0], "victim-id") {
		t.Errorf("X-Request-Id upstream = %q, want exactly the client's one, suffixed", vs)
	}
	if vs := headerValues(h, "x-forwarded-for"); len(vs) != 1 || vs[0] != "6.6.6.6, 127.0.0.1" {
		t.Errorf("X-Forwarded-For upstream = %q, want one field with the client's IP appended", vs)
	}
	if vs := headerValues(h, "endpoint-load-metrics-format"); len(vs) != 1 || vs[0] != "TEXT" {
		t.Errorf("ORCA format upstream = %q, want only the proxy's TEXT", vs)
	}
	if vs := headerValues(h, "x-kept"); len(vs) != 1 {
		t.Errorf("an end-to-end header was dropped: %q", vs)
	}

	resp := []byte(r.head + "\r\n")
	for _, name := range []string{"x-private", "keep-alive", "upgrade", "proxy-authenticate", "endpoint-load-metrics"} {
		if vs := headerValues(resp, name); len(vs) != 0 {
			t.Errorf("%q reached the client: %q", name, vs)
		}
	}
	if vs := headerValues(resp, "x-request-id"); len(vs) != 1 || vs[0] != "victim-id" {
		t.Errorf("X-Request-Id to the client = %q, want exactly the client's own", vs)
	}
	if vs := headerValues(resp, "x-kept"); len(vs) != 1 {
		t.Errorf("an end-to-end response header was dropped: %q", vs)
	}
	if l := tp.Pool().Backends()[0].state.Latest(); l == nil || l.Source.String() != "orca" {
		t.Errorf("a lowercase endpoint-load-metrics answer was not read as ORCA: %+v", l)
	}
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// isUpstreamIDOf reports whether up is what the backend gets for a client's
// id: id, '-' and 16 hex digits (appendUpstreamID).
func isUpstreamIDOf(up, id string) bool {
	rest, ok := strings.CutPrefix(up, id+"-")
	return ok && generatedID.MatchString(rest)
}

// A client's X-Request-Id is used only when it is one field of at most 128
// visible ASCII characters; otherwise a generated id replaces it, upstream
// and in the answer, and no two ids reach the backend. A client's usable id
// comes back to it as sent and reaches the backend suffixed
// (appendUpstreamID); a generated one is the same on both sides.
func TestRequestIDIsBounded(t *testing.T) {
	be := startRawBackend(t, okResponder(""))
	tp := startProxy(t, testConfig(be.url()))
	cases := []struct {
		name, fields string
		keep         string // "" = must be replaced
	}{
		{"short", "X-Request-Id: abc-123\r\n", "abc-123"},
		{"128 chars", "X-Request-Id: " + strings.Repeat("a", 128) + "\r\n", strings.Repeat("a", 128)},
		{"129 chars", "X-Request-Id: " + strings.Repeat("a", 129) + "\r\n", ""},
		{"60 KB", "X-Request-Id: " + strings.Repeat("b", 60<<10) + "\r\n", ""},
		{"inner space", "X-Request-Id: a b\r\n", ""},
		{"non-ASCII", "X-Request-Id: caf\xc3\xa9\r\n", ""},
		{"two fields, two cases", "X-Request-Id: mine\r\nx-request-id: victim\r\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(be.requests())
			r := rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n"+tc.fields+"\r\n")
			if r.status != 200 {
				t.Fatalf("status %d %q", r.status, r.body)
			}
			heads := be.requests()[before:]
			if len(heads) != 1 {
				t.Fatalf("backend got %d requests", len(heads))
			}
			up := headerValues(heads[0], "x-request-id")
			down := headerValues([]byte(r.head+"\r\n"), "x-request-id")
			if len(up) != 1 || len(down) != 1 {
				t.Fatalf("ids upstream %q, to the client %q: want one each", up, down)
			}
			if tc.keep != "" && (down[0] != tc.keep || !isUpstreamIDOf(up[0], tc.keep)) {
				t.Errorf("id to the client %q, upstream %q: want the client's %q, suffixed upstream", down[0], up[0], tc.keep)
			}
			if tc.keep == "" && (!generatedID.MatchString(up[0]) || up[0] != down[0]) {
				t.Errorf("ids upstream %.40q, to the client %.40q: want one generated id on both sides", up[0], down[0])
			}
		})
	}
}

// ORCA works against a model server that writes lowercase header names, as
// vLLM's uvicorn does: the answer refreshes the backend's state and the
// header, in no case, reaches the client.
func TestORCAAgainstLowercaseHeaderNames(t *testing.T) {
	f := simFleet(t, 1, func(c *vllmsim.Config) { c.TimeScale = 0.05; c.LowercaseHeaders = true })
	cfg := probeConfig(f)
	cfg.Route.Policy = "cached"
	cfg.Scrape.Adaptive = false
	cfg.Scrape.Interval = config.Duration(time.Hour)
	cfg.Scrape.MaxInterval = config.Duration(time.Hour)
	tp := startProxy(t, cfg)
	b := tp.Pool().Backends()[0]
	waitUntil(t, 2*time.Second, func() bool { return b.state.Latest() != nil }, "the first scrape")
	body := `{"model":"` + vllmsim.DefaultConfig().Model + `","prompt":"hi","max_tokens":2}`
	for i := 0; i < 3; i++ {
		before := b.state.Latest()
		r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		if r.status != 200 {
			t.Fatalf("status %d %q", r.status, r.body)
		}
		if strings.Contains(strings.ToLower(r.head), "endpoint-load-metrics") {
			t.Fatalf("the ORCA header reached the client:\n%s", r.head)
		}
		l := b.state.Latest()
		if l == nil || l == before || l.Source.String() != "orca" {
			t.Fatalf("answer %d did not refresh the state from ORCA: %+v", i, l)
		}
	}
}

// logSink is a bytes.Buffer safe for the logger's concurrent writes.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The access log says when a client's X-Request-Id was replaced, and logs
// the id that was used, never the client's unusable one.
func TestAccessLogSaysRequestIDReplaced(t *testing.T) {
	be := startRawBackend(t, okResponder(""))
	cfg := testConfig(be.url())
	cfg.Log.Access = true
	var logs logSink
	tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })
	long := strings.Repeat("z", 200)
	if r := rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Request-Id: "+long+"\r\n\r\n"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if r := rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Request-Id: fine-id\r\n\r\n"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	var replaced, kept bool
	waitUntil(t, 2*time.Second, func() bool {
		replaced, kept = false, false
		for _, line := range strings.Split(logs.String(), "\n") {
			var ev struct {
				ID       string `json:"request_id"`
				Replaced bool   `json:"request_id_replaced"`
			}
			if json.Unmarshal([]byte(line), &ev) != nil || ev.ID == "" {
				continue
			}
			if ev.ID == long {
				t.Fatal("the unusable id was logged as the request id")
			}
			replaced = replaced || (ev.Replaced && generatedID.MatchString(ev.ID))
			kept = kept || (ev.ID == "fine-id" && !ev.Replaced)
		}
		return replaced && kept
	}, "access log lines for both requests")
}
