package route

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// testCert is the certificate of the package's https test backends, self-
// signed for 127.0.0.1. With upstream.tls at its defaults the proxy trusts
// the system's roots and names the backend's host as server name.
// TestMain makes testCert the one root the process trusts, through
// SSL_CERT_FILE (the environment's way to trust a private CA; the tests of
// upstream.tls.ca_file and the other keys are in upstreamtls_config_test.go).
var testCert tls.Certificate

// trustTestCert creates testCert and points SSL_CERT_FILE at it. Call it
// before anything loads the system roots (they are loaded once).
func trustTestCert() (cleanup func(), err error) {
	testCert, err = selfSigned()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "probegate-route-tls")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCert.Certificate[0]}), 0o600); err != nil {
		return nil, err
	}
	if err := os.Setenv("SSL_CERT_FILE", file); err != nil {
		return nil, err
	}
	return func() { os.RemoveAll(dir) }, nil
}

// selfSigned returns a new self-signed certificate for 127.0.0.1 and
// localhost.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "probegate test backend"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// testTLSConfig is a test backend's TLS configuration: testCert, at most
// TLS version maxVersion (0: 1.3). Dynamic record sizing is off, so each
// Write of a handler is one record: tests place bytes in records as they
// mean to.
func testTLSConfig(maxVersion uint16) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{testCert}, MaxVersion: maxVersion, DynamicRecordSizingDisabled: true}
}

// startTLSRawBackend is startRawBackend serving https.
func startTLSRawBackend(t testing.TB, maxVersion uint16, respond func(c net.Conn, n int, head []byte) bool) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startRawBackendOn(t, tls.NewListener(cutterListener{ln}, testTLSConfig(maxVersion)), "https", respond)
}

// recordCutter is a test backend's socket under TLS. While cut is set, it
// holds the record it is given and sends it together with the first 10
// bytes of the next one, whose rest it drops: the proxy reads a whole
// answer and, in the same read, the start of a record that never ends.
type recordCutter struct {
	net.Conn
	cut  bool // owned by the connection's handler goroutine
	held []byte
}

func (r *recordCutter) Write(p []byte) (int, error) {
	switch {
	case !r.cut:
		return r.Conn.Write(p)
	case r.held == nil:
		r.held = append([]byte(nil), p...)
		return len(p), nil
	}
	_, err := r.Conn.Write(append(r.held, p[:10]...))
	r.held, r.cut = nil, false
	return len(p), err
}

// cutRecords makes c, a connection of startTLSRawBackend, cut its next
// two records as recordCutter says.
func cutRecords(c net.Conn) { c.(*tls.Conn).NetConn().(*recordCutter).cut = true }

type cutterListener struct{ net.Listener }

func (l cutterListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordCutter{Conn: c}, nil
}

// connsCarrying counts the backend's connections whose bytes contain s.
func (u *rawBackend) connsCarrying(s string) int {
	n := 0
	for _, l := range u.connLogs() {
		if bytes.Contains(l, []byte(s)) {
			n++
		}
	}
	return n
}

var tlsVersions = []struct {
	name string
	max  uint16
}{{"TLS1.3", 0}, {"TLS1.2", tls.VersionTLS12}}

// An https backend that writes stray bytes after its Content-Length
// answer (a whole fake answer carrying the first client's data) in the
// same TLS record as the answer's end, in the next record, or in a record
// 50 ms later, or as the start of a record that never ends ("partial
// record", read with the answer's end), never shifts the next client's
// response: it gets its own answer, and A's bytes never. Where the stray
// bytes wait differs: in the large answer's one record, which outlasts the
// proxy's 4 KiB read buffer, they stay decrypted inside the TLS
// connection; a next record read with the answer waits there undecrypted;
// one 50 ms later waits in the socket. B's request is written once: not
// into the tainted session first, then retried.
func TestStrayTLSUpstreamBytesNeverReachAnotherClient(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nsecret-of-A"
	const bodyB = `{"for":"B"}`
	for _, v := range tlsVersions {
		for _, size := range []int{16, 9000} {
			for _, mode := range []string{"same record", "next record", "record 50ms later", "partial record"} {
				t.Run(fmt.Sprintf("%s/%dB/%s", v.name, size, mode), func(t *testing.T) {
					bodyA := `{"for":"A","pad":"` + strings.Repeat("a", size) + `"}`
					written := make(chan struct{}, 1) // the stray bytes left the backend
					be := startTLSRawBackend(t, v.max, func(c net.Conn, n int, head []byte) bool {
						switch {
						case bytes.HasPrefix(head, []byte("POST /b ")):
							_, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(bodyB)) + "\r\n\r\n" + bodyB))
							return err == nil
						case !bytes.HasPrefix(head, []byte("POST /a ")):
							return okResponder("")(c, n, head)
						}
						resp := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(bodyA)) + "\r\n\r\n" + bodyA
						switch mode {
						case "same record":
							c.Write([]byte(resp + stray))
						case "next record":
							c.Write([]byte(resp))
							c.Write([]byte(stray))
						case "partial record":
							cutRecords(c)
							c.Write([]byte(resp))
							c.Write([]byte(stray))
						default:
							c.Write([]byte(resp))
							time.Sleep(50 * time.Millisecond)
							c.Write([]byte(stray))
						}
						written <- struct{}{}
						return true
					})
					cfg := tlsTestConfig(be.url())
					cfg.Upstream.MaxConnsPerBackend = 1 // one connection: reuse is forced
					tp := startProxy(t, cfg)
					a := rawDo(t, tp.addr, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
					if a.status != 200 || a.body != bodyA {
						t.Fatalf("client A got %d %.60q, want its own answer", a.status, a.body)
					}
					select {
					case <-written:
					case <-time.After(5 * time.Second):
						t.Fatal("the backend never wrote its stray bytes")
					}
					time.Sleep(20 * time.Millisecond) // and they crossed the loopback
					b := rawDo(t, tp.addr, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
					if strings.Contains(b.head+b.body, "secret") {
						t.Fatalf("client B got A's stray bytes: %d %q", b.status, b.body)
					}
					if b.status != 200 || b.body != bodyB {
						t.Fatalf("client B got %d %q, want its own %q", b.status, b.body, bodyB)
					}
					// Nor was B's request sent into the tainted session
					// first and retried: the model server runs it once.
					if n := be.connsCarrying("POST /b "); n != 1 {
						t.Errorf("B's request reached the backend on %d connections, want 1", n)
					}
				})
			}
		}
	}
}

// Over TLS too, a backend that answers 101 gets its client a 502, its
// connection is never pooled, and the next clients get their own answers
// on a fresh connection.
func TestNoUpgradeTunnelsOverTLS(t *testing.T) {
	be := startTLSRawBackend(t, 0, tunnelResponder(nil))
	cfg := tlsTestConfig(be.url())
	cfg.Upstream.MaxConnsPerBackend = 1
	tp := startProxy(t, cfg)
	a := rawDo(t, tp.addr, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
	if a.status != 502 || strings.Contains(a.head+a.body, "PRIVATE") {
		t.Errorf("101 answer: status %d body %q, want a 502 without the tunnel's bytes", a.status, a.body)
	}
	// The 101 session's connection is closed, not pooled: until that
	// lands (at once, but a starved -race run has been seen to take longer
	// than the 50 ms slept here) the one connection slot is
	// taken and the proxy answers 503. A connection that is never given
	// back keeps it 503 past the bound.
	time.Sleep(50 * time.Millisecond) // the frame has arrived at the proxy
	deadline := time.Now().Add(5 * time.Second)
	for rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n").status == 503 {
		if time.Now().After(deadline) {
			t.Fatal("the 101 session's connection was not given back within 5 s: every next client gets 503")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		b := rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
		if b.status != 200 || b.body != "{}" {
			t.Fatalf("next client %d: status %d body %q, want its own 200 {}", i, b.status, b.body)
		}
	}
	for _, log := range be.connLogs() {
		if bytes.HasPrefix(log, []byte("GET /ws ")) && bytes.Count(log, []byte("HTTP/1.1\r\n")) != 1 {
			t.Errorf("another request was written into the 101 session:\n%s", log)
		}
	}
}

// The guard costs a well-behaved https backend no connections: 100
// sequential requests (TLS 1.3 session tickets and all) go over one.
func TestTLSGuardKeepsConnectionsAlive(t *testing.T) {
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			var mu sync.Mutex
			remotes := map[string]bool{}
			s := newTLSUpstream(t, v.max, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				remotes[r.RemoteAddr] = true
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"ok":true}`))
			})
			cfg := tlsTestConfig(s.URL)
			tp := startProxy(t, cfg)
			c := &http.Client{Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			for i := 0; i < 100; i++ {
				resp, err := c.Post(tp.url("/x"), "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || buf.String() != `{"ok":true}` {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, buf.String())
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(remotes) != 1 {
				t.Errorf("100 sequential requests took %d upstream connections, want 1", len(remotes))
			}
		})
	}
}

// newTLSUpstream starts a net/http server on testCert.
func newTLSUpstream(t *testing.T, maxVersion uint16, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.TLS = testTLSConfig(maxVersion)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// The proxy's own TLS handshake is the one fasthttp made: the backend's
// host goes out as SNI and the certificate is verified against the
// system's roots. A backend whose certificate no root vouches for never
// gets a request, its client gets an error envelope, and its breaker
// counts the failures.
func TestUpstreamTLSVerifiesAndSendsServerName(t *testing.T) {
	var mu sync.Mutex
	var names []string
	s := newTLSUpstream(t, 0, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names = append(names, r.TLS.ServerName)
		mu.Unlock()
		w.Write([]byte(`{}`))
	})
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	tp := startProxy(t, tlsTestConfig("https://localhost:"+port))
	if r := rawDo(t, tp.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status != 200 || r.body != "{}" {
		t.Fatalf("trusted backend: %d %q", r.status, r.body)
	}
	mu.Lock()
	if len(names) != 1 || names[0] != "localhost" {
		t.Errorf("the backend saw server names %q, want [localhost]", names)
	}
	mu.Unlock()

	other, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the untrusted backend got %s %s", r.Method, r.URL)
	}))
	untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{other}}
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	untrusted.StartTLS()
	defer untrusted.Close()
	tp2 := startProxy(t, tlsTestConfig(untrusted.URL))
	for i := 0; i < 3; i++ {
		r := rawDo(t, tp2.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		if r.status < 500 || !strings.Contains(r.body, `"error"`) {
			t.Fatalf("untrusted backend: %d %q, want an error envelope", r.status, r.body)
		}
	}
	// A failed handshake is a failed dial of that backend, which its
	// breaker counts (breaker.consecutive_failures is 3 here).
	if v := tp2.counter(t, "probegate_breaker_state", nil); v == 0 {
		t.Error("3 failed handshakes left the backend's breaker closed")
	}
}

// A backend that accepts the connection and never answers the handshake
// holds a request no longer than upstream.connect_timeout per attempt
// (the TCP connect and the handshake are one step), however long
// first_byte_timeout is.
func TestUpstreamTLSHandshakeIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	cfg := tlsTestConfig("https://" + ln.Addr().String())
	cfg.Upstream.ConnectTimeout = config.Duration(300 * time.Millisecond)
	cfg.Upstream.FirstByteTimeout = config.Duration(10 * time.Second)
	cfg.Upstream.Retries = 0
	tp := startProxy(t, cfg)
	start := time.Now()
	r := rawDo(t, tp.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if d := time.Since(start); r.status < 500 || d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("silent handshake: %d %q after %v, want an error after about 300ms", r.status, r.body, d)
	}
}

// BenchmarkGuardUnreadTLS is the guard's cost per request on a reused TLS
// connection: a Read that may not touch the socket (one lock, no syscall),
// the framing check, and the socket's non-blocking recv.
func BenchmarkGuardUnreadTLS(b *testing.B) {
	cc, sc := tcpPair(b)
	rec := &recordConn{Conn: cc}
	host, _, _ := net.SplitHostPort(cc.RemoteAddr().String())
	tc := tls.Client(rec, &tls.Config{ServerName: host})
	ts := tls.Server(sc, testTLSConfig(0))
	go func() {
		buf := make([]byte, 1)
		if _, err := ts.Read(buf); err == nil { // after the handshake and its tickets
			ts.Write(buf)
		}
	}()
	if _, err := tc.Write([]byte("x")); err != nil {
		b.Fatal(err)
	}
	if _, err := tc.Read(make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	g := newGuardedConn(tc, nil)
	b.ReportAllocs()
	for b.Loop() {
		if g.unread() {
			b.Fatal("unread bytes on an idle connection")
		}
	}
}

// A fresh https connection is not a reused one: a backend that closes it
// after reading the request, before any answer, is counted by its breaker
// like a plain one. (When fasthttp shook hands in the first request's
// write, the handshake's own reply marked the connection as having carried
// a response, so such failures passed for a stale keep-alive connection
// and the breaker ignored them.)
func TestFreshTLSConnectionFailureCounts(t *testing.T) {
	be := startTLSRawBackend(t, 0, func(c net.Conn, n int, head []byte) bool {
		if bytes.HasPrefix(head, []byte("POST /x ")) {
			return false // closes without an answer
		}
		return okResponder("")(c, n, head)
	})
	tp := startProxy(t, tlsTestConfig(be.url()))
	for i := 0; i < 3; i++ {
		if r := rawDo(t, tp.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status < 500 {
			t.Fatalf("request %d: %d %q, want an error", i, r.status, r.body)
		}
	}
	if v := tp.counter(t, "probegate_breaker_state", nil); v == 0 {
		t.Error("resets on fresh connections left the backend's breaker closed")
	}
}
