package route

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/testutil"
)

// tlsSeen is what an https test backend saw: the server names of its
// handshakes, the client certificates of its requests, its connections.
type tlsSeen struct {
	mu       sync.Mutex
	names    []string
	clients  []string // CommonName of each request's client certificate ("" for none)
	requests atomic.Int64
	conns    atomic.Int64
}

func (s *tlsSeen) lastClient() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clients) == 0 {
		return ""
	}
	return s.clients[len(s.clients)-1]
}

// tlsBackend starts an https backend on 127.0.0.1 serving cert, asking
// for a client certificate issued by clientCAs when it is non-nil, at
// most TLS version maxVersion (0: 1.3). h answers requests (nil: `{}`).
func tlsBackend(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool, maxVersion uint16, h http.HandlerFunc) (*httptest.Server, *tlsSeen) {
	t.Helper()
	seen := &tlsSeen{}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.requests.Add(1)
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		seen.mu.Lock()
		seen.names = append(seen.names, r.TLS.ServerName)
		seen.clients = append(seen.clients, cn)
		seen.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Write([]byte(`{}`))
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: maxVersion}
	if clientCAs != nil {
		s.TLS.ClientCAs = clientCAs
		s.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			seen.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, seen
}

// tlsTestConfig is testConfig for https backends, with
// upstream.connect_timeout 10 s. The TCP connect and the TLS handshake
// share that bound (tlsDialer), and here one -race process runs both
// sides of every handshake: starved, it has taken past the default 2 s,
// and the client got a 503 where the test judged something else
// ("request not sent ... read tcp ...: i/o timeout" after 2.16 s). Tests
// of the bound itself set their own.
func tlsTestConfig(backends ...string) *config.Config {
	c := testConfig(backends...)
	c.Upstream.ConnectTimeout = config.Duration(10 * time.Second)
	return c
}

// startLoggingProxy is startProxy with its logs (access log on) in logs.
func startLoggingProxy(t *testing.T, cfg *config.Config, logs *syncBuffer) *testProxy {
	cfg.Log.Access = true
	return startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(logs) })
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const post2 = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"

// wantTLSFailure checks that r is the 502 of a failed upstream handshake
// in vLLM's error envelope, and that the logs name the cause.
func wantTLSFailure(t *testing.T, r rawResponse, logs *syncBuffer, causes ...string) {
	t.Helper()
	const envelope = `{"error":{"message":"the model server failed to answer","type":"BadGatewayError","param":null,"code":502}}`
	if r.status != 502 || r.body != envelope {
		t.Errorf("got %d %q, want 502 %s", r.status, r.body, envelope)
	}
	for _, c := range causes {
		if logs.count(c) == 0 {
			t.Errorf("no log names %q:\n%s", c, logs.String())
		}
	}
}

// An https backend whose certificate a private CA issued: with
// upstream.tls.ca_file naming that CA, requests go through; with the
// system's roots (here: only testCert, see TestMain) every handshake
// fails, the client gets a 502 in vLLM's envelope, the backend never sees
// a request, and the log names the backend and the cause.
func TestUpstreamTLSCAFile(t *testing.T) {
	ca := testutil.NewCA(t, "private CA")
	srv, seen := tlsBackend(t, ca.Server(t, "backend", "127.0.0.1"), nil, 0, nil)
	caFile := testutil.WriteFile(t, t.TempDir(), "ca.pem", ca.PEM())

	var logs syncBuffer
	tp := startLoggingProxy(t, tlsTestConfig(srv.URL), &logs)
	wantTLSFailure(t, rawDo(t, tp.addr, post2), &logs,
		`"message":"upstream TLS handshake failed (see upstream.tls)"`,
		`"backend":"`+srv.Listener.Addr().String()+`"`,
		"certificate signed by unknown authority")
	if n := seen.requests.Load(); n != 0 {
		t.Fatalf("the backend served %d requests over an unverified connection", n)
	}
	// Every request fails the same way; the backend's failure is logged
	// once per 10 s, each request's in its access log line.
	for range 4 {
		rawDo(t, tp.addr, post2)
	}
	if n := logs.count(`"message":"upstream TLS handshake failed (see upstream.tls)"`); n != 1 {
		t.Errorf("5 failed requests logged the handshake failure %d times, want 1", n)
	}
	if n := logs.count(`"message":"request"`); n != 5 {
		t.Errorf("%d access log lines, want 5", n)
	}

	cfg := tlsTestConfig(srv.URL)
	cfg.Upstream.TLS.CAFile = caFile
	tp2 := startProxy(t, cfg)
	for i := range 3 {
		if r := rawDo(t, tp2.addr, post2); r.status != 200 || r.body != "{}" {
			t.Fatalf("request %d with ca_file: %d %q", i, r.status, r.body)
		}
	}
	// The IP address is verified against the certificate's IP SAN and
	// sent as no SNI (RFC 6066 allows host names only).
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.names) != 3 || seen.names[0] != "" {
		t.Errorf("server names %q, want 3 empty", seen.names)
	}
}

// A backend that requires a client certificate (mTLS): with
// upstream.tls.cert_file and key_file it gets the proxy's certificate on
// every request; without them the client gets a 502 and the backend
// serves nothing. Under TLS 1.2 the handshake itself fails; under TLS 1.3
// the server refuses the certificate after the client's side of the
// handshake completed, on the first read: both are 502s whose cause is
// logged.
func TestUpstreamMTLS(t *testing.T) {
	serverCA := testutil.NewCA(t, "server CA")
	clientCA := testutil.NewCA(t, "client CA")
	client := clientCA.Client(t, "probegate-client")
	dir := t.TempDir()
	caFile := testutil.WriteFile(t, dir, "ca.pem", serverCA.PEM())
	certFile := testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(client))
	keyFile := testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, client))
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			srv, seen := tlsBackend(t, serverCA.Server(t, "backend", "127.0.0.1"), clientCA.Pool(), v.max, nil)
			cfg := tlsTestConfig(srv.URL)
			cfg.Upstream.TLS = config.UpstreamTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
			tp := startProxy(t, cfg)
			for i := range 3 {
				if r := rawDo(t, tp.addr, post2); r.status != 200 || r.body != "{}" {
					t.Fatalf("request %d with a client certificate: %d %q", i, r.status, r.body)
				}
			}
			if c := seen.lastClient(); c != "probegate-client" {
				t.Errorf("the backend saw client certificate %q, want probegate-client", c)
			}

			served := seen.requests.Load()
			var logs syncBuffer
			cfg = tlsTestConfig(srv.URL)
			cfg.Upstream.TLS = config.UpstreamTLS{CAFile: caFile}
			tp2 := startLoggingProxy(t, cfg, &logs)
			cause := "remote error: tls: certificate required" // TLS 1.3's alert, after the handshake
			if v.max == tls.VersionTLS12 {
				cause = "upstream TLS handshake failed: remote error: tls: handshake failure"
			}
			wantTLSFailure(t, rawDo(t, tp2.addr, post2), &logs, cause)
			if n := seen.requests.Load() - served; n != 0 {
				t.Errorf("the backend served %d requests without a client certificate", n)
			}
		})
	}
}

// upstream.tls.server_name names the certificate's service for backends
// addressed by IP: it goes out as SNI and is what the certificate is
// verified against. Without it the same certificate does not verify for
// 127.0.0.1.
func TestUpstreamTLSServerName(t *testing.T) {
	ca := testutil.NewCA(t, "mesh CA")
	srv, seen := tlsBackend(t, ca.Server(t, "vllm", "vllm.models.svc"), nil, 0, nil)
	caFile := testutil.WriteFile(t, t.TempDir(), "ca.pem", ca.PEM())

	cfg := tlsTestConfig(srv.URL)
	cfg.Upstream.TLS = config.UpstreamTLS{CAFile: caFile, ServerName: "vllm.models.svc"}
	tp := startProxy(t, cfg)
	if r := rawDo(t, tp.addr, post2); r.status != 200 {
		t.Fatalf("with server_name: %d %q", r.status, r.body)
	}
	seen.mu.Lock()
	names := append([]string(nil), seen.names...)
	seen.mu.Unlock()
	if len(names) != 1 || names[0] != "vllm.models.svc" {
		t.Errorf("server names %q, want [vllm.models.svc]", names)
	}

	var logs syncBuffer
	cfg = tlsTestConfig(srv.URL)
	cfg.Upstream.TLS = config.UpstreamTLS{CAFile: caFile}
	tp2 := startLoggingProxy(t, cfg, &logs)
	wantTLSFailure(t, rawDo(t, tp2.addr, post2), &logs,
		`"server_name":"127.0.0.1"`, "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs")
}

// mtlsMetricsBackend is an https vLLM stand-in that requires a client
// certificate of clientCA, reports waiting requests at GET /metrics
// (counted in gets) and answers completions (counted in served).
func mtlsMetricsBackend(t *testing.T, serverCA, clientCA *testutil.CA, waiting int, gets, served *atomic.Int64) string {
	srv, _ := tlsBackend(t, serverCA.Server(t, "backend", "127.0.0.1"), clientCA.Pool(), 0, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
			gets.Add(1)
			fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"m\"} 2.0\nvllm:num_requests_waiting{model_name=\"m\"} %d.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n", waiting)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"text_completion","choices":[]}`))
	})
	return srv.URL
}

// Probes (policy probe) and scrapes (policy cached) use upstream.tls as
// forwarding does: against two mTLS backends behind a private CA, one
// reporting 40 waiting requests, they read both backends' load and every
// request goes to the idle one. With the client certificate left out,
// forwarding fails and so does every probe and scrape: a probe never
// succeeds where a request would fail.
func TestProbesAndScrapesUseUpstreamTLS(t *testing.T) {
	serverCA := testutil.NewCA(t, "server CA")
	clientCA := testutil.NewCA(t, "client CA")
	client := clientCA.Client(t, "probegate-client")
	dir := t.TempDir()
	full := config.UpstreamTLS{
		CAFile:   testutil.WriteFile(t, dir, "ca.pem", serverCA.PEM()),
		CertFile: testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(client)),
		KeyFile:  testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, client)),
	}
	for _, tc := range []struct{ policy, metric string }{
		{"probe", "probegate_probes_total"},
		{"cached", "probegate_scrapes_total"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			var busyGets, idleGets, busyServed, idleServed atomic.Int64
			busy := mtlsMetricsBackend(t, serverCA, clientCA, 40, &busyGets, &busyServed)
			idle := mtlsMetricsBackend(t, serverCA, clientCA, 0, &idleGets, &idleServed)
			cfg := tlsTestConfig(busy, idle)
			cfg.Route.Policy = tc.policy
			cfg.Upstream.TLS = full
			tp := startProxy(t, cfg)
			complete(t, tp.url("/v1/completions"), "m", 4, false)
			waitUntil(t, 5*time.Second, func() bool { return busyGets.Load() > 0 && idleGets.Load() > 0 }, "GET /metrics over mTLS on both backends")
			busyServed.Store(0)
			idleServed.Store(0)
			for range 20 {
				complete(t, tp.url("/v1/completions"), "m", 4, false)
			}
			if n := tp.counter(t, tc.metric, map[string]string{"outcome": "error"}); n != 0 {
				t.Errorf("%v %s failed", n, tc.metric)
			}
			if busyServed.Load() != 0 || idleServed.Load() != 20 {
				t.Errorf("requests served: busy backend %d, idle %d; want 0 and 20", busyServed.Load(), idleServed.Load())
			}

			// No client certificate: requests and load reads fail alike
			// (a probe times out or errs: fasthttp retries the GET on the
			// connection the backend closed).
			cfg = tlsTestConfig(busy, idle)
			cfg.Route.Policy = tc.policy
			cfg.Upstream.TLS = config.UpstreamTLS{CAFile: full.CAFile}
			tp2 := startProxy(t, cfg)
			for range 3 {
				if r := rawDo(t, tp2.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status != 502 {
					t.Errorf("without a client certificate: %d %q, want 502", r.status, r.body)
				}
			}
			failed := func() float64 {
				return tp2.counter(t, tc.metric, map[string]string{"outcome": "error"}) +
					tp2.counter(t, tc.metric, map[string]string{"outcome": "timeout"})
			}
			waitUntil(t, 5*time.Second, func() bool { return failed() > 0 }, tc.metric+" failing without a client certificate")
			if n := tp2.counter(t, tc.metric, map[string]string{"outcome": "ok"}); n != 0 {
				t.Errorf("%v %s succeeded without a client certificate (%v failed)", n, tc.metric, failed())
			}
		})
	}
}

// SIGHUP's reload re-reads upstream.tls's files. A reload that changed
// nothing keeps the pooled connection; a rotated client certificate is
// presented on the very next request (the pooled connection made with the
// old one is replaced, not reused); a file that no longer loads is
// refused with its key named and the running settings keep serving; a CA
// rotated to one that does not vouch for the backend fails the next
// request, even though a verified connection sat in the pool.
func TestUpstreamTLSReloadRotates(t *testing.T) {
	serverCA := testutil.NewCA(t, "server CA")
	clientCA := testutil.NewCA(t, "client CA")
	srv, seen := tlsBackend(t, serverCA.Server(t, "backend", "127.0.0.1"), clientCA.Pool(), 0, nil)
	dir := t.TempDir()
	first := clientCA.Client(t, "first")
	cfg := tlsTestConfig(srv.URL)
	cfg.Upstream.TLS = config.UpstreamTLS{
		CAFile:   testutil.WriteFile(t, dir, "ca.pem", serverCA.PEM()),
		CertFile: testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(first)),
		KeyFile:  testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, first)),
	}
	var logs syncBuffer
	tp := startLoggingProxy(t, cfg, &logs)
	do := func(what string, wantStatus int, wantClient string, wantConns int64) {
		t.Helper()
		r := rawDo(t, tp.addr, post2)
		if r.status != wantStatus {
			t.Fatalf("%s: %d %q, want %d", what, r.status, r.body, wantStatus)
		}
		if wantClient != "" && seen.lastClient() != wantClient {
			t.Errorf("%s: client certificate %q, want %q", what, seen.lastClient(), wantClient)
		}
		if wantConns > 0 && seen.conns.Load() != wantConns {
			t.Errorf("%s: the backend saw %d connections, want %d", what, seen.conns.Load(), wantConns)
		}
	}
	do("start", 200, "first", 1)
	do("keep-alive", 200, "first", 1)

	if err := tp.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	do("reload, nothing changed", 200, "first", 1)

	second := clientCA.Client(t, "second")
	testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(second))
	testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, second))
	if err := tp.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	do("reload, rotated client certificate", 200, "second", 2)
	if logs.count("upstream.tls changed") != 1 {
		t.Errorf("want one log of the change:\n%s", logs.String())
	}

	testutil.WriteFile(t, dir, "client-key.pem", []byte("not a key\n"))
	err := tp.Reload(cfg)
	if err == nil || !strings.Contains(err.Error(), "upstream.tls.key_file") {
		t.Fatalf("reload with a broken key file: %v, want a problem naming upstream.tls.key_file", err)
	}
	do("after a refused reload", 200, "second", 2)

	testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, second))
	testutil.WriteFile(t, dir, "ca.pem", testutil.NewCA(t, "another CA").PEM())
	if err := tp.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	served := seen.requests.Load()
	wantTLSFailure(t, rawDo(t, tp.addr, post2), &logs, "certificate signed by unknown authority")
	if n := seen.requests.Load() - served; n != 0 {
		t.Errorf("after the CA rotation, %d requests went out on the connection the old CA verified", n)
	}
}

// insecure_skip_verify accepts a certificate nothing vouches for, and is
// logged as a warning at start.
func TestUpstreamTLSInsecureSkipVerify(t *testing.T) {
	ca := testutil.NewCA(t, "unknown CA")
	srv, _ := tlsBackend(t, ca.Server(t, "backend", "somewhere.else"), nil, 0, nil)
	cfg := tlsTestConfig(srv.URL)
	cfg.Upstream.TLS.InsecureSkipVerify = true
	var logs syncBuffer
	tp := startLoggingProxy(t, cfg, &logs)
	if r := rawDo(t, tp.addr, post2); r.status != 200 {
		t.Fatalf("insecure_skip_verify: %d %q", r.status, r.body)
	}
	if n := logs.count(`"level":"warn","key":"upstream.tls.insecure_skip_verify","message":"INSECURE: https backends' certificates are NOT verified`); n != 1 {
		t.Errorf("%d insecure warnings, want 1:\n%s", n, logs.String())
	}
}

// Backends found by DNS are host:port; backends.scheme https speaks TLS to
// them with upstream.tls (here a private CA and the Service's name for a
// pod reached by IP), requests and scrapes alike. A reload that changes
// the scheme replaces the backend: the next request goes out the new way.
func TestDiscoveredBackendsOverTLS(t *testing.T) {
	ca := testutil.NewCA(t, "mesh CA")
	srv, seen := tlsBackend(t, ca.Server(t, "vllm", "vllm.models.svc"), nil, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, "vllm:num_requests_running{model_name=\"m\"} 0.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.1\n")
			return
		}
		w.Write([]byte(`{}`))
	})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := &fakeDNS{}
	dns.set("127.0.0.1")
	cfg := tlsTestConfig()
	cfg.Backends.DNS = "pods.test:" + port
	cfg.Backends.Scheme = config.SchemeHTTPS
	cfg.Route.Policy = "cached"
	cfg.Upstream.TLS = config.UpstreamTLS{CAFile: testutil.WriteFile(t, t.TempDir(), "ca.pem", ca.PEM()), ServerName: "vllm.models.svc"}
	var logs syncBuffer
	tp := startProxy(t, cfg, func(o *Options) { o.LookupHost = dns.lookup; o.Logger = zerolog.New(&logs) })
	if r := rawDo(t, tp.addr, post2); r.status != 200 || r.body != "{}" {
		t.Fatalf("https over DNS: %d %q", r.status, r.body)
	}
	waitUntil(t, 5*time.Second, func() bool {
		return tp.counter(t, "probegate_scrapes_total", map[string]string{"outcome": "ok"}) > 0
	}, "a scrape over TLS")
	if n := tp.counter(t, "probegate_scrapes_total", map[string]string{"outcome": "error"}); n != 0 {
		t.Errorf("%v scrapes failed", n)
	}

	plain := *cfg
	plain.Backends.Scheme = config.SchemeHTTP
	if err := tp.Reload(&plain); err != nil {
		t.Fatal(err)
	}
	served := seen.requests.Load()
	// Plain HTTP to a TLS server: Go's server answers 400 itself.
	if r := rawDo(t, tp.addr, post2); r.status != 400 || !strings.Contains(r.body, "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("after the reload to http: %d %q, want the server's 400 to plain HTTP", r.status, r.body)
	}
	if seen.requests.Load() != served {
		t.Error("a request reached the handler over plain HTTP")
	}
	if logs.count("backend scheme changed: replaced") != 1 {
		t.Errorf("want one log of the replacement:\n%s", logs.String())
	}
	if err := tp.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if r := rawDo(t, tp.addr, post2); r.status != 200 {
		t.Errorf("back to https: %d %q", r.status, r.body)
	}
}
