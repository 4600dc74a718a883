package config

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// UpstreamTLS configures the TLS client side of every connection to an
// https:// backend: forwarded requests, probes and scrapes alike (upstream.tls).
// Every field is empty by default: the system's roots (SSL_CERT_FILE and
// SSL_CERT_DIR apply), no client certificate, each backend's host as the
// server name.
type UpstreamTLS struct {
	// CAFile: PEM file of the CA certificates that verify the backends'
	// certificates, instead of the system's roots. Default "".
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile: PEM files of the client certificate (chain)
	// and its private key, presented to backends that ask for one (mTLS).
	// Both or neither. Default "".
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName: the name sent as SNI and verified against every
	// backend's certificate, instead of the host of each backend's
	// address. Default "".
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify: accept any certificate (no verification at all).
	// Not together with CAFile. Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// ClientTLS is upstream.tls with its files read: the TLS client
// configuration shared by every connection to an https backend.
type ClientTLS struct {
	// Config holds RootCAs (nil: the system's roots), Certificates,
	// ServerName (empty: each backend's host) and InsecureSkipVerify. It
	// is shared and must not be modified; clone it to derive one.
	Config *tls.Config
	// Sum is a digest of the settings and of the files' bytes: two loads
	// with equal Sums configure connections identically (a reload that
	// changed nothing keeps the pooled connections).
	Sum [sha256.Size]byte
}

// Load reads t's files and returns the client configuration they make, or
// an Errors naming the upstream.tls key of each problem. Validate calls it
// too (-check reads the files), and the proxy calls it again when it
// starts and on every reload, so that a rotated certificate, key or CA is
// picked up by a SIGHUP.
func (t UpstreamTLS) Load() (ClientTLS, error) {
	v := &checker{}
	c := v.upstreamTLS(t)
	if len(v.probs) > 0 {
		return ClientTLS{}, v.probs
	}
	return c, nil
}

const tlsBase = "upstream.tls"

// upstreamTLS checks t, reading its files, and returns the configuration
// they make (meaningful only when no problem was added).
func (v *checker) upstreamTLS(t UpstreamTLS) ClientTLS {
	h := sha256.New()
	fmt.Fprintf(h, "server_name=%q insecure=%t\n", t.ServerName, t.InsecureSkipVerify)
	cfg := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	before := len(v.probs)

	if t.InsecureSkipVerify && t.CAFile != "" {
		v.add(tlsBase+".insecure_skip_verify", "must not be true together with %s.ca_file: "+
			"ca_file asks to verify backends against a CA, insecure_skip_verify to verify nothing (remove one)", tlsBase)
	}
	if s := t.ServerName; s != "" && net.ParseIP(s) == nil && (strings.ContainsAny(s, ":/ \t") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".")) {
		v.add(tlsBase+".server_name", "must be a host name or IP address (no scheme, port or path), got %q", s)
	}
	if t.CAFile != "" {
		if pem, ok := v.readFile(tlsBase+".ca_file", t.CAFile); ok {
			fmt.Fprintf(h, "ca %d\n", len(pem))
			h.Write(pem)
			cfg.RootCAs = v.certPool(tlsBase+".ca_file", t.CAFile, pem)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.add(tlsBase+".key_file", "must be set with %s.cert_file (the client certificate's private key)", tlsBase)
	case t.CertFile == "" && t.KeyFile != "":
		v.add(tlsBase+".cert_file", "must be set with %s.key_file (the client certificate)", tlsBase)
	case t.CertFile != "":
		certPEM, okC := v.readFile(tlsBase+".cert_file", t.CertFile)
		keyPEM, okK := v.readFile(tlsBase+".key_file", t.KeyFile)
		if okC {
			okC = v.hasCertificate(tlsBase+".cert_file", t.CertFile, certPEM)
		}
		if okK && !hasPEM(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }) {
			v.add(tlsBase+".key_file", "%q holds no PEM private key (a \"... PRIVATE KEY\" block)", t.KeyFile)
			okK = false
		}
		if okC && okK {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				v.add(tlsBase+".key_file", "%q does not go with %s.cert_file %q: %s", t.KeyFile, tlsBase, t.CertFile, strings.TrimPrefix(err.Error(), "tls: "))
			} else {
				cfg.Certificates = []tls.Certificate{pair}
				fmt.Fprintf(h, "cert %d key %d\n", len(certPEM), len(keyPEM))
				h.Write(certPEM)
				h.Write(keyPEM)
			}
		}
	}
	if len(v.probs) > before {
		return ClientTLS{}
	}
	c := ClientTLS{Config: cfg}
	h.Sum(c.Sum[:0])
	return c
}

// maxPEMBytes bounds a file upstream.tls names: a CA bundle of every
// public root is about 200 KiB.
const maxPEMBytes = 4 << 20

// readFile reads the file a key names, or adds a problem. It must be a
// regular file (a Kubernetes Secret's symlinks are followed) of at most
// maxPEMBytes: -check never blocks on a pipe or reads a device forever.
func (v *checker) readFile(path, file string) ([]byte, bool) {
	st, err := os.Stat(file)
	switch {
	case err != nil:
		v.add(path, "cannot read %q: %v", file, unwrapPathError(err))
		return nil, false
	case st.IsDir():
		v.add(path, "%q is a directory, not a PEM file", file)
		return nil, false
	case !st.Mode().IsRegular():
		v.add(path, "%q is not a regular file", file)
		return nil, false
	case st.Size() > maxPEMBytes:
		v.add(path, "%q is larger than %d MiB: not a PEM file of certificates or a key", file, maxPEMBytes>>20)
		return nil, false
	}
	f, err := os.Open(file)
	if err != nil {
		v.add(path, "cannot read %q: %v", file, unwrapPathError(err))
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		v.add(path, "cannot read %q: %v", file, unwrapPathError(err))
		return nil, false
	}
	if len(b) > maxPEMBytes {
		v.add(path, "%q is larger than %d MiB: not a PEM file of certificates or a key", file, maxPEMBytes>>20)
		return nil, false
	}
	return b, true
}

// certPool parses every CERTIFICATE block of data, or adds a problem.
func (v *checker) certPool(path, file string, data []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			v.add(path, "%q: certificate %d does not parse: %v", file, n+1, err)
			return nil
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		v.add(path, "%q holds no PEM certificate (a \"CERTIFICATE\" block)", file)
		return nil
	}
	return pool
}

// hasCertificate reports whether data holds a CERTIFICATE block, or adds a
// problem.
func (v *checker) hasCertificate(path, file string, data []byte) bool {
	if hasPEM(data, func(typ string) bool { return typ == "CERTIFICATE" }) {
		return true
	}
	v.add(path, "%q holds no PEM certificate (a \"CERTIFICATE\" block)", file)
	return false
}

// hasPEM reports whether data holds a PEM block whose type is accepted.
func hasPEM(data []byte, accept func(typ string) bool) bool {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return false
		}
		if accept(b.Type) {
			return true
		}
	}
}
