package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/probegate/probegate/internal/testutil"
	"github.com/probegate/probegate/internal/vllmsim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's own background sleepers: the idle-connection cleaner
		// of each HostClient, the dialer's address cache cleaner, the server
		// date updater and the worker pool cleaner. They wake up after
		// seconds and exit; none of them is ours.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeConfig(t *testing.T, path, backends, policy string) {
	t.Helper()
	cfg := fmt.Sprintf(`server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  shutdown_grace: 5s
backends:
  static: [%s]
route:
  policy: %s
log:
  access: false
`, backends, policy)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeConfig(t, good, `"http://127.0.0.1:8001"`, "probe")
	var out, errb bytes.Buffer
	if code := run([]string{"-config", good, "-check"}, &out, &errb, nil, nil); code != 0 {
		t.Fatalf("-check on a valid file: exit %d, stderr %s", code, errb.String())
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("route:\n  d: -1\nprobe:\n  dedline: 5ms\nbackends:\n  static: [\"http://127.0.0.1:8001\"]\n"), 0o600)
	out.Reset()
	errb.Reset()
	if code := run([]string{"-config", bad, "-check"}, &out, &errb, nil, nil); code != 2 {
		t.Fatalf("-check on an invalid file: exit %d, want 2", code)
	}
	for _, want := range []string{"route.d: must be auto (0) or 1..64, got -1", "unknown key probe.dedline"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("-check output lacks %q:\n%s", want, errb.String())
		}
	}
	if code := run([]string{"-config", filepath.Join(dir, "missing.yaml"), "-check"}, &out, &errb, nil, nil); code != 2 {
		t.Fatalf("-check on a missing file: exit %d, want 2", code)
	}
}

func TestServeReloadAndDrain(t *testing.T) {
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.05
	fleet, err := vllmsim.StartFleet(2, "127.0.0.1", 0, sim)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeConfig(t, path, `"`+fleet.URLs()[0]+`"`, "least_inflight")

	sig := make(chan os.Signal, 1)
	ready := make(chan [2]string, 1)
	logs := &syncBuf{}
	exit := make(chan int, 1)
	go func() { exit <- run([]string{"-config", path}, io.Discard, logs, sig, ready) }()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case code := <-exit:
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("proxy did not start")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	ask := func() int {
		resp, err := c.Post("http://"+addrs[0]+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"`+sim.Model+`","prompt":"hi","max_tokens":4}`))
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ask(); code != 200 {
		t.Fatalf("status %d", code)
	}

	// An invalid reload is rejected, logged by key, and the old config serves.
	os.WriteFile(path, []byte("route:\n  policy: fastest\n"), 0o600)
	sig <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(logs.String(), "route.policy") }, "reload rejection logged by key")
	if code := ask(); code != 200 {
		t.Fatalf("after a rejected reload: status %d", code)
	}

	// A valid reload swaps the backend set.
	writeConfig(t, path, `"`+fleet.URLs()[1]+`"`, "probe")
	sig <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(logs.String(), "configuration reloaded") }, "reload applied")
	resp, err := c.Get("http://" + addrs[1] + "/debug/backends")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), fleet.Addrs()[1]) || strings.Contains(string(b), fleet.Addrs()[0]) {
		t.Fatalf("/debug/backends after reload: %s", b)
	}
	if code := ask(); code != 200 {
		t.Fatalf("after a valid reload: status %d", code)
	}

	// Admin endpoints.
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": "probegate_requests_total"} {
		resp, err := c.Get("http://" + addrs[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, b)
		}
	}
	resp, err = c.Get("http://" + addrs[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, fam := range []string{"go_goroutines", "process_resident_memory_bytes", "probegate_backend_inflight"} {
		if !strings.Contains(string(b), fam) {
			t.Errorf("/metrics lacks %s", fam)
		}
	}

	sig <- syscall.SIGTERM
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// -check reads upstream.tls's files and names the key of each problem.
func TestCheckUpstreamTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "test CA")
	client := ca.Client(t, "probegate")
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM())
	certFile := testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(client))
	keyFile := testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, client))
	otherKey := testutil.WriteFile(t, dir, "other-key.pem", testutil.KeyPEM(t, ca.Client(t, "other")))
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name, tls, want string
	}{
		{"valid", "ca_file: " + caFile + "\n    cert_file: " + certFile + "\n    key_file: " + keyFile + "\n    server_name: vllm.models.svc", ""},
		{"ca_file missing", "ca_file: " + missing, `upstream.tls.ca_file: cannot read "` + missing + `": no such file or directory`},
		{"ca_file without a certificate", "ca_file: " + keyFile, `upstream.tls.ca_file: "` + keyFile + `" holds no PEM certificate (a "CERTIFICATE" block)`},
		{"cert without key", "cert_file: " + certFile, "upstream.tls.key_file: must be set with upstream.tls.cert_file (the client certificate's private key)"},
		{"key without cert", "key_file: " + keyFile, "upstream.tls.cert_file: must be set with upstream.tls.key_file (the client certificate)"},
		{"key of another certificate", "cert_file: " + certFile + "\n    key_file: " + otherKey, `upstream.tls.key_file: "` + otherKey + `" does not go with upstream.tls.cert_file "` + certFile + `": private key does not match public key`},
		{"insecure with ca_file", "ca_file: " + caFile + "\n    insecure_skip_verify: true", "upstream.tls.insecure_skip_verify: must not be true together with upstream.tls.ca_file"},
		{"server_name with a port", "server_name: vllm:8000", `upstream.tls.server_name: must be a host name or IP address (no scheme, port or path), got "vllm:8000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			cfg := "backends:\n  static: [\"https://10.0.0.7:8000\"]\nupstream:\n  tls:\n    " + tt.tls + "\n"
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run([]string{"-config", path, "-check"}, &out, &errb, nil, nil)
			if tt.want == "" {
				if code != 0 {
					t.Fatalf("exit %d, stderr %s", code, errb.String())
				}
				return
			}
			if code != 2 || !strings.Contains(errb.String(), "\n  "+tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and the line %q", code, errb.String(), tt.want)
			}
		})
	}
}
