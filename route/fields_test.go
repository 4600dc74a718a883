package route

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// fieldRequests are client requests that carry, in every case and shape,
// the fields the proxy strips or rewrites (and a few it keeps).
var fieldRequests = []string{
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nconnection: close\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nkeep-alive: 5\r\nKEEP-ALIVE: 6\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nte: trailers\r\nTE: gzip\r\nupgrade: websocket\r\nUpGrAdE: h2c\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nproxy-authorization: Basic c2VjcmV0\r\nPROXY-CONNECTION: keep-alive\r\nProxy-Authenticate: x\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\ntrailer: X-T\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: x-secret, X-Request-Id\r\nx-secret: s\r\nx-request-id: gone\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: x-forwarded-for\r\nx-forwarded-for: 6.6.6.6\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-forwarded-for: 1.1.1.1\r\nX-FORWARDED-FOR: 2.2.2.2, 3.3.3.3\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-request-id: mine\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\r\nx-request-id: b\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-request-id: has space\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nendpoint-load-metrics-format: JSON\r\nENDPOINT-LOAD-METRICS: x\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Kept: yes\r\nCookie: a=b\r\nCookie: c=d\r\nUser-Agent: u\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\nConnection: x-t\r\n\r\n2\r\n{}\r\n0\r\nX-T: t\r\nX-Request-Id: from-trailer\r\n\r\n",
	"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
}

// The single pass over a request's raw fields (scanFields) finds every
// field the proxy strips or rewrites: the header readied for the backend
// is the same as when every field is looked for (allFields), in any case,
// repeated, named by Connection, or in a chunked body's trailer.
func TestFieldScanCleansRequestsAsAFullStrip(t *testing.T) {
	p := &Proxy{rand: func() uint64 { return 0x1234 }}
	for _, raw := range fieldRequests {
		var got, want string
		var gotRC, wantRC reqCtx
		var gotRepl, wantRepl bool
		for i, rc := range []*reqCtx{&gotRC, &wantRC} {
			var ctx fasthttp.RequestCtx
			if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			msg, fields := scanFields(ctx.Request.Header.RawHeaders())
			if msg != "" {
				t.Fatalf("%q refused: %s", raw, msg)
			}
			if i == 0 {
				gotRepl = p.cleanRequest(&ctx, rc, fields)
				got = ctx.Request.Header.String()
			} else {
				wantRepl = p.cleanRequest(&ctx, rc, allFields)
				want = ctx.Request.Header.String()
			}
		}
		if got != want || string(gotRC.id) != string(wantRC.id) || gotRepl != wantRepl || gotRC.clientClose != wantRC.clientClose {
			t.Errorf("%q:\nscanned:  %q id %q replaced %v close %v\nall:      %q id %q replaced %v close %v",
				raw, got, gotRC.id, gotRepl, gotRC.clientClose, want, wantRC.id, wantRepl, wantRC.clientClose)
		}
		for _, name := range []string{"connection", "keep-alive", "te", "upgrade", "trailer", "proxy-authorization", "proxy-connection", "x-secret", "endpoint-load-metrics-format"} {
			if vs := headerValues([]byte(got), name); len(vs) != 0 {
				t.Errorf("%q: %s reaches the backend: %q", raw, name, vs)
			}
		}
	}
}

// scanFields gives every field to a request whose parsed header may hold
// fields its raw block does not show: one without a raw block (built by
// code) and one with a chunked body (trailer fields).
func TestFieldScanFallsBackToEveryField(t *testing.T) {
	if _, f := scanFields(nil); f != allFields {
		t.Errorf("no raw block: %b, want every field", f)
	}
	if _, f := scanFields([]byte("Host: x\r\ntransfer-encoding: chunked\r\n\r\n")); f != allFields {
		t.Errorf("chunked: %b, want every field", f)
	}
	if _, f := scanFields([]byte("Host: x\r\nContent-Length: 2\r\nX-Kept: 1\r\n\r\n")); f != 0 {
		t.Errorf("no field of the proxy's: %b, want none", f)
	}
}

// fieldResponses are backend heads that carry the fields the proxy strips
// from a response, in every case and shape.
var fieldResponses = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nkeep-alive: timeout=5\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nconnection: close, x-private\r\nx-private: p\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nCONNECTION: X-Request-Id\r\nUPGRADE: h2c\r\nproxy-authenticate: Basic\r\nProxy-Connection: x\r\nte: x\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nendpoint-load-metrics: TEXT named_metrics.kv_cache_usage_perc=0.5\r\nx-request-id: someone-else\r\nX-REQUEST-ID: again\r\nx-kept: yes\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nTrailer: X-T, Server\r\nServer: up\r\nSet-Cookie: a=b\r\n\r\n",
}

// The single pass over a backend head's fields (responseFields) finds
// every field the proxy strips: the client's head is the same as when
// every field is looked for.
func TestFieldScanCleansResponsesAsAFullStrip(t *testing.T) {
	for _, raw := range fieldResponses {
		var src fasthttp.ResponseHeader
		if err := src.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		var got, want fasthttp.ResponseHeader
		fields, _ := responseFields(&src)
		copyHead(&got, &src, fields, []byte("id-1"))
		copyHead(&want, &src, allFields, []byte("id-1"))
		if got.String() != want.String() {
			t.Errorf("%q:\nscanned: %q\nall:     %q", raw, got.String(), want.String())
		}
		for _, name := range []string{"connection", "keep-alive", "te", "upgrade", "trailer", "proxy-authenticate", "proxy-connection", "x-private", "endpoint-load-metrics"} {
			if vs := headerValues([]byte(got.String()), name); len(vs) != 0 {
				t.Errorf("%q: %s reaches the client: %q", raw, name, vs)
			}
		}
		if vs := headerValues([]byte(got.String()), "x-request-id"); len(vs) != 1 || vs[0] != "id-1" {
			t.Errorf("%q: X-Request-Id to the client %q, want the proxy's alone", raw, vs)
		}
	}
}

// BenchmarkCleanHeaders measures readying a typical request header for the
// backend and a typical backend head for the client, with the fields
// found by the scans against every field looked for (the cost before the
// scans).
func BenchmarkCleanHeaders(b *testing.B) {
	const rawReq = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	const rawResp = "HTTP/1.1 200 OK\r\nServer: fasthttp\r\nDate: Tue, 01 Dec 2026 16:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
	p := &Proxy{rand: func() uint64 { return 0x1234 }}
	var src fasthttp.ResponseHeader
	if err := src.Read(bufio.NewReader(strings.NewReader(rawResp))); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"scan", "all"} {
		b.Run(mode, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(strings.NewReader(rawReq))); err != nil {
				b.Fatal(err)
			}
			var dst fasthttp.ResponseHeader
			rc := newReqCtx()
			b.ReportAllocs()
			for b.Loop() {
				req.Header.CopyTo(&ctx.Request.Header)
				_, fields := scanFields(req.Header.RawHeaders())
				rf := allFields
				if mode == "scan" {
					rf, _ = responseFields(&src)
				} else {
					fields = allFields
				}
				p.cleanRequest(&ctx, rc, fields)
				copyHead(&dst, &src, rf, rc.id)
			}
		})
	}
}
