package probe

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/testutil"
	"github.com/probegate/probegate/internal/upstreamtls"
)

// HTTPFetcher probes an https backend with its TLS Source's configuration
// (a private CA, a server name), and follows the Source: once it changes,
// the backend's pooled connection is not reused, so a probe verifies
// what a forwarded request would. A Store of equal settings keeps it.
func TestHTTPFetcherFollowsTLSSource(t *testing.T) {
	ca := testutil.NewCA(t, "private CA")
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"server_load": 3}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "vllm", "vllm.models.svc")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	good := config.UpstreamTLS{CAFile: testutil.WriteFile(t, dir, "ca.pem", ca.PEM()), ServerName: "vllm.models.svc"}
	load := func(u config.UpstreamTLS) config.ClientTLS {
		c, err := u.Load()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	src := upstreamtls.NewSource(load(good))
	f := &HTTPFetcher{TLS: src}
	s := NewHTTPSState(strings.TrimPrefix(srv.URL, "https://"))
	defer f.Forget(s)
	fetch := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		l, err := f.Fetch(ctx, s, EndpointLoad)
		if err == nil && l.ServerLoad != 3 {
			t.Errorf("load %+v, want server_load 3", l)
		}
		return err
	}
	for range 3 {
		if err := fetch(); err != nil {
			t.Fatal(err)
		}
	}
	if src.Store(load(good)) {
		t.Error("storing the same settings counted as a change")
	}
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("4 fetches took %d connections, want 1", n)
	}

	// Another CA: the verified connection in the pool is not reused.
	other := config.UpstreamTLS{CAFile: testutil.WriteFile(t, dir, "other.pem", testutil.NewCA(t, "other").PEM()), ServerName: "vllm.models.svc"}
	if !src.Store(load(other)) {
		t.Fatal("another CA did not count as a change")
	}
	if err := fetch(); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("fetch under a CA that does not vouch for the backend: %v", err)
	}
	// No server name: the certificate does not name 127.0.0.1.
	src.Store(load(config.UpstreamTLS{CAFile: good.CAFile}))
	if err := fetch(); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("fetch without the server name: %v", err)
	}
	src.Store(load(good))
	if err := fetch(); err != nil {
		t.Fatalf("back to the right settings: %v", err)
	}
}
