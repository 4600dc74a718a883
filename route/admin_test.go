package route

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAdminServesProfiles: the admin listener serves Go's profiles for
// `go tool pprof`, and only for GET.
func TestAdminServesProfiles(t *testing.T) {
	p := benchProxy(t, 2, "least_inflight")
	srv := httptest.NewServer(p.AdminHandler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/debug/pprof/":                  "goroutine",
		"/debug/pprof/allocs?debug=1":    "heap profile",
		"/debug/pprof/goroutine?debug=1": "goroutine profile",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Post(srv.URL+"/debug/pprof/profile?seconds=1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST profile: %d, want 405", resp.StatusCode)
	}
}
