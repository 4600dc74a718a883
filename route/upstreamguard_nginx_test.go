package route

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An OpenSSL server (nginx, when installed) sends its TLS 1.3 session
// tickets after the handshake, as Go's does: the guard consumes them with
// the first answer and costs no redial. 100 sequential requests go over
// one upstream connection, for TLS 1.3 and 1.2.
func TestTLSGuardKeepsNginxConnectionsAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the nginx TLS session-ticket proof")
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skipf("nginx not on PATH (%v): skipping the proof that an OpenSSL server's TLS 1.3 session tickets cost no redial (apt-get install nginx)", err)
	}
	for _, proto := range []string{"TLSv1.3", "TLSv1.2"} {
		t.Run(proto, func(t *testing.T) {
			dir := t.TempDir()
			key, err := x509.MarshalPKCS8PrivateKey(testCert.PrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCert.Certificate[0]}), 0o600)
			os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			conf := fmt.Sprintf(`daemon off; master_process off; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 64; }
http {
  log_format conn '$connection $request_method $uri';
  access_log %[1]s/access.log conn;
  client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server {
    listen %[2]s ssl;
    ssl_certificate %[1]s/cert.pem; ssl_certificate_key %[1]s/key.pem; ssl_protocols %[3]s;
    keepalive_requests 10000; keepalive_timeout 60s;
    location / { default_type application/json; return 200 '{}'; }
  }
}
`, dir, addr, proto)
			os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600)
			cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			ftPoll(t, 5*time.Second, "nginx listens", func() bool {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
			tp := startProxy(t, testConfig("https://"+addr))
			for i := 0; i < 100; i++ {
				if r := rawDo(t, tp.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status != 200 || r.body != "{}" {
					t.Fatalf("request %d: %d %q (nginx: %s)", i, r.status, r.body, out.String())
				}
			}
			logb, err := os.ReadFile(filepath.Join(dir, "access.log"))
			if err != nil {
				t.Fatal(err)
			}
			conns := map[string]int{}
			for _, l := range strings.Split(string(logb), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[1] == "POST" {
					conns[f[0]]++
				}
			}
			if len(conns) != 1 {
				t.Errorf("100 sequential requests took %d nginx connections, want 1", len(conns))
			}
		})
	}
}
