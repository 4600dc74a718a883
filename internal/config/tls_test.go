package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probegate/probegate/internal/testutil"
)

// tlsFiles writes a CA, a client certificate it issued and that
// certificate's key, and a key of another certificate, to a temporary
// directory.
type tlsFiles struct {
	dir, ca, cert, key, otherKey string
}

func writeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca := testutil.NewCA(t, "test CA")
	client := ca.Client(t, "probegate")
	other := ca.Client(t, "someone else")
	return tlsFiles{
		dir:      dir,
		ca:       testutil.WriteFile(t, dir, "ca.pem", ca.PEM()),
		cert:     testutil.WriteFile(t, dir, "client.pem", testutil.CertPEM(client)),
		key:      testutil.WriteFile(t, dir, "client-key.pem", testutil.KeyPEM(t, client)),
		otherKey: testutil.WriteFile(t, dir, "other-key.pem", testutil.KeyPEM(t, other)),
	}
}

func TestUpstreamTLSLoads(t *testing.T) {
	f := writeTLSFiles(t)
	c := valid()
	c.Upstream.TLS = UpstreamTLS{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, ServerName: "vllm.models.svc"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Upstream.TLS.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.RootCAs == nil || len(got.Config.Certificates) != 1 || got.Config.ServerName != "vllm.models.svc" || got.Config.InsecureSkipVerify {
		t.Fatalf("config %+v", got.Config)
	}

	// The default is the system's roots, no certificate, no name.
	def, err := UpstreamTLS{}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if def.Config.RootCAs != nil || len(def.Config.Certificates) != 0 || def.Config.ServerName != "" {
		t.Fatalf("default config %+v", def.Config)
	}

	// Sum: the same files give the same Sum; a rotated file another.
	again, _ := c.Upstream.TLS.Load()
	if again.Sum != got.Sum {
		t.Error("two loads of the same files differ")
	}
	os.WriteFile(f.ca, append(testutil.NewCA(t, "rotated").PEM(), testutil.NewCA(t, "rotated 2").PEM()...), 0o600)
	rotated, err := c.Upstream.TLS.Load()
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Sum == got.Sum {
		t.Error("a rotated ca_file kept the Sum")
	}
	if def.Sum == got.Sum {
		t.Error("the default and a configured upstream.tls have the same Sum")
	}
}

func TestUpstreamTLSProblems(t *testing.T) {
	f := writeTLSFiles(t)
	notPEM := testutil.WriteFile(t, f.dir, "not.pem", []byte("hello\n"))
	missing := filepath.Join(f.dir, "missing.pem")
	huge := testutil.WriteFile(t, f.dir, "huge.pem", make([]byte, maxPEMBytes+1))
	tests := []struct {
		name string
		tls  UpstreamTLS
		want string // a "path: msg" line's prefix
	}{
		{"ca missing", UpstreamTLS{CAFile: missing}, `upstream.tls.ca_file: cannot read "` + missing + `": no such file or directory`},
		{"ca directory", UpstreamTLS{CAFile: f.dir}, `upstream.tls.ca_file: "` + f.dir + `" is a directory, not a PEM file`},
		{"ca not PEM", UpstreamTLS{CAFile: notPEM}, `upstream.tls.ca_file: "` + notPEM + `" holds no PEM certificate`},
		{"ca too large", UpstreamTLS{CAFile: huge}, `upstream.tls.ca_file: "` + huge + `" is larger than 4 MiB`},
		{"ca a device", UpstreamTLS{CAFile: os.DevNull}, `upstream.tls.ca_file: "` + os.DevNull + `" is not a regular file`},
		{"ca is a key", UpstreamTLS{CAFile: f.key}, `upstream.tls.ca_file: "` + f.key + `" holds no PEM certificate`},
		{"cert without key", UpstreamTLS{CertFile: f.cert}, `upstream.tls.key_file: must be set with upstream.tls.cert_file`},
		{"key without cert", UpstreamTLS{KeyFile: f.key}, `upstream.tls.cert_file: must be set with upstream.tls.key_file`},
		{"cert missing", UpstreamTLS{CertFile: missing, KeyFile: f.key}, `upstream.tls.cert_file: cannot read "` + missing + `"`},
		{"key missing", UpstreamTLS{CertFile: f.cert, KeyFile: missing}, `upstream.tls.key_file: cannot read "` + missing + `"`},
		{"cert is a key", UpstreamTLS{CertFile: f.key, KeyFile: f.key}, `upstream.tls.cert_file: "` + f.key + `" holds no PEM certificate`},
		{"key is a cert", UpstreamTLS{CertFile: f.cert, KeyFile: f.cert}, `upstream.tls.key_file: "` + f.cert + `" holds no PEM private key`},
		{"key of another cert", UpstreamTLS{CertFile: f.cert, KeyFile: f.otherKey}, `upstream.tls.key_file: "` + f.otherKey + `" does not go with upstream.tls.cert_file "` + f.cert + `": private key does not match public key`},
		{"insecure with ca", UpstreamTLS{CAFile: f.ca, InsecureSkipVerify: true}, `upstream.tls.insecure_skip_verify: must not be true together with upstream.tls.ca_file`},
		{"server_name port", UpstreamTLS{ServerName: "vllm:8000"}, `upstream.tls.server_name: must be a host name or IP address (no scheme, port or path), got "vllm:8000"`},
		{"server_name url", UpstreamTLS{ServerName: "https://vllm"}, `upstream.tls.server_name: must be a host name or IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			c.Upstream.TLS = tt.tls
			errs := problems(t, c.Validate())
			if len(errs) != 1 || !strings.HasPrefix(errs[0].String(), tt.want) {
				t.Fatalf("problems %q, want one starting %q", errs, tt.want)
			}
			// Load, the proxy's path, refuses it the same way.
			if _, err := tt.tls.Load(); err == nil || err.Error() != errs.Error() {
				t.Fatalf("Load: %v, want %v", err, errs)
			}
		})
	}

	// Allowed: no verification with a client certificate or a name (SNI).
	ok := []UpstreamTLS{
		{InsecureSkipVerify: true, CertFile: f.cert, KeyFile: f.key, ServerName: "vllm"},
		{ServerName: "10.0.0.7"},
		{ServerName: "::1"},
	}
	for _, u := range ok {
		c := valid()
		c.Upstream.TLS = u
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", u, err)
		}
	}
}

// The keys decode from YAML under upstream.tls, and -check (Parse) reads
// the files.
func TestUpstreamTLSParse(t *testing.T) {
	f := writeTLSFiles(t)
	y := "backends:\n  static: [\"https://10.0.0.7:8000\"]\nupstream:\n  tls:\n    ca_file: " + f.ca +
		"\n    cert_file: " + f.cert + "\n    key_file: " + f.key + "\n    server_name: vllm.models.svc\n"
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := UpstreamTLS{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, ServerName: "vllm.models.svc"}
	if c.Upstream.TLS != want {
		t.Fatalf("got %+v, want %+v", c.Upstream.TLS, want)
	}
	_, err = Parse([]byte("backends:\n  static: [\"https://10.0.0.7:8000\"]\nupstream:\n  tls:\n    ca_fle: x\n    cert_file: " + f.cert + "\n"))
	got := problems(t, err).Error()
	for _, w := range []string{"unknown key upstream.tls.ca_fle (did you mean upstream.tls.ca_file?)", "upstream.tls.key_file: must be set with upstream.tls.cert_file"} {
		if !strings.Contains(got, w) {
			t.Errorf("problems %q lack %q", got, w)
		}
	}
}

// A host:port found by DNS or Kubernetes uses TLS when backends.scheme is
// https; a URL keeps its own scheme.
func TestTargetAddr(t *testing.T) {
	for _, tt := range []struct {
		scheme, raw, addr string
		tls               bool
	}{
		{SchemeHTTP, "10.0.0.7:8000", "10.0.0.7:8000", false},
		{SchemeHTTPS, "10.0.0.7:8000", "10.0.0.7:8000", true},
		{SchemeHTTPS, "http://10.0.0.7:8000", "10.0.0.7:8000", false},
		{SchemeHTTP, "https://10.0.0.7:8000", "10.0.0.7:8000", true},
	} {
		addr, tls, ok := Backends{Scheme: tt.scheme}.TargetAddr(tt.raw)
		if !ok || addr != tt.addr || tls != tt.tls {
			t.Errorf("scheme %s, %q: %q %v %v", tt.scheme, tt.raw, addr, tls, ok)
		}
	}
	c := valid()
	c.Backends.Static = nil
	c.Backends.DNS = "vllm.models.svc:8000"
	c.Backends.Scheme = SchemeHTTPS
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
