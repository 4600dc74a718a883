package evloop

import (
	"bytes"
	"testing"
)

var testLimits = limits{head: 4096, headers: 32, body: 1 << 20}

// Well-formed requests the loop does not serve are handed over, not
// refused; the plain shape is served.
func TestParseRequestOutcomes(t *testing.T) {
	cases := []struct {
		name, req string
		outcome   int
	}{
		{"plain POST", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", parseOK},
		{"GET without body", "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", parseOK},
		{"incomplete head", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n", parseMore},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", parseHandOver},
		{"expect", "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", parseHandOver},
		{"upgrade", "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", parseHandOver},
		{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", parseHandOver},
		{"HEAD", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", parseHandOver},
		{"absolute form", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", parseHandOver},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", parseHandOver},
		{"two Connection fields", "GET / HTTP/1.1\r\nHost: x\r\nConnection: x-a\r\nConnection: close\r\n\r\n", parseHandOver},
		{"two Connection fields, framing refused first", "POST / HTTP/1.1\r\nHost: x\r\nConnection: a\r\nConnection: b\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", parseRefuse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			if got, status := parseRequest([]byte(tc.req), &testLimits, &r); got != tc.outcome {
				t.Fatalf("outcome %d (status %d), want %d", got, status, tc.outcome)
			}
		})
	}
}

// The request head and body are found where they are, header fields keep
// their names as sent and lose surrounding white space, and Connection
// decides the close.
func TestParseRequestFields(t *testing.T) {
	req := "POST /v1/chat?x=1 HTTP/1.1\r\nHost: h\r\nX-Model:  \tllama \r\nConnection: close\r\nContent-Length: 3\r\n\r\nabcEXTRA"
	var r Request
	if got, _ := parseRequest([]byte(req), &testLimits, &r); got != parseOK {
		t.Fatal(got)
	}
	if string(r.Method()) != "POST" || string(r.Target()) != "/v1/chat?x=1" || string(r.Body()) != "abc" ||
		string(r.Header("x-model")) != "llama" || !r.close || r.NumHeaders() != 4 || r.total != len(req)-5 {
		t.Fatalf("parsed %q %q %q %q close=%v n=%d total=%d", r.Method(), r.Target(), r.Body(), r.Header("x-model"), r.close, r.NumHeaders(), r.total)
	}
	if n, v := r.HeaderAt(1); string(n) != "X-Model" || string(v) != "llama" {
		t.Fatalf("HeaderAt(1) = %q %q", n, v)
	}
}

// The upstream request loses hop-by-hop headers and those Connection
// names, and gets the decision's edits.
func TestAppendUpstreamRequest(t *testing.T) {
	req := "POST /p HTTP/1.1\r\nHost: h\r\nConnection: x-hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nX-Request-Id: client\r\nX-Drop: 1\r\nContent-Length: 2\r\n\r\n{}"
	var r Request
	if got, _ := parseRequest([]byte(req), &testLimits, &r); got != parseOK {
		t.Fatal(got)
	}
	d := Decision{Set: []Header{{"X-Request-Id", []byte("ours")}}, Del: []string{"x-drop"}}
	got := string(appendUpstreamRequest(nil, &r, &d))
	want := "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX-Request-Id: ours\r\n\r\n{}"
	if got != want {
		t.Fatalf("upstream request\n%q\nwant\n%q", got, want)
	}
}

// Response heads the relay cannot frame are refused; the relayed head
// loses hop-by-hop headers and says close when the client's connection
// ends.
func TestResponseHeads(t *testing.T) {
	for _, bad := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTX/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 000 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 600 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 999 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\nX-A: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n folded: yes\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX A: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: b\rSet-Cookie: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: b\x00c\r\n\r\n",
	} {
		var h respHead
		if got := parseResponse([]byte(bad), 4096, &h); got != parseRefuse {
			t.Fatalf("%q: outcome %d", bad, got)
		}
	}
	head := "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n"
	var h respHead
	if got := parseResponse([]byte(head+"ok"), 4096, &h); got != parseOK || h.length != 2 || h.status != 200 || h.size != len(head) {
		t.Fatalf("%d %+v", got, h)
	}
	if got := string(appendResponseHead(nil, []byte(head), true, nil)); got != "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n" {
		t.Fatalf("relayed head %q", got)
	}
}

// FuzzParseRequest: any input parses without panicking, and an accepted
// request's fields lie inside its head, its body inside the input's
// framing, with exactly one framing.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close, x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		lim := limits{head: 1024, headers: 16, body: 1 << 16}
		outcome, status := parseRequest(b, &lim, &r)
		switch outcome {
		case parseRefuse:
			if status < 400 || status > 599 {
				t.Fatalf("refused with %d", status)
			}
		case parseOK, parseHandOver:
			end := bytes.Index(b, crlfcrlf)
			if r.head != end+4 || r.total < r.head || r.head > lim.head || r.NumHeaders() > lim.headers {
				t.Fatalf("head %d total %d for a head ending at %d", r.head, r.total, end)
			}
			for i := range r.NumHeaders() {
				n, v := r.HeaderAt(i)
				if len(n) == 0 || bytes.ContainsAny(n, " \t\r\n:") || bytes.ContainsAny(v, "\r\n") {
					t.Fatalf("header %q: %q", n, v)
				}
			}
			if outcome == parseOK && len(b) >= r.total {
				_ = appendUpstreamRequest(nil, &r, &Decision{})
				if r.Header("transfer-encoding") != nil {
					t.Fatal("a Transfer-Encoding request served by the loop")
				}
			}
		}
	})
}
