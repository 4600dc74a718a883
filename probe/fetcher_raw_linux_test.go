//go:build linux

package probe

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/rawconn"
)

// TestHTTPFetcherDialsRaw: probe and scrape connections read and write
// with raw system calls (internal/rawconn), plain and under TLS, so a
// probe wakes neither sysmon nor another thread; and a fetch over them
// works.
func TestHTTPFetcherDialsRaw(t *testing.T) {
	srv := newFakeVLLM(t)
	f := &HTTPFetcher{}
	s := NewState(srv.addr())
	t.Cleanup(func() { f.Forget(s) })
	hc := f.newHostClient(s)
	if hc.DialTimeout == nil {
		t.Fatal("a plain backend's client dials with fasthttp's default dialer (net.Conn reads and writes)")
	}
	c, err := hc.DialTimeout(srv.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*rawconn.Conn); !ok {
		t.Fatalf("a plain backend's probe connection is a %T, want *rawconn.Conn", c)
	}
	if l, err := f.Fetch(context.Background(), s, EndpointMetrics); err != nil || l.Running != 5 {
		t.Fatalf("fetch over a raw connection: %+v, %v", l, err)
	}

	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ts.Close()
	tc, err := dialTLS(strings.TrimPrefix(ts.URL, "https://"), time.Second, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if under := tc.(*tls.Conn).NetConn(); under == nil {
		t.Fatal("no connection under TLS")
	} else if _, ok := under.(*rawconn.Conn); !ok {
		t.Fatalf("under TLS the probe connection is a %T, want *rawconn.Conn", under)
	}
}
