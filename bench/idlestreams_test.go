package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readGoMetrics keeps the unlabelled go_ samples of an admin /metrics, and
// a listener that answers without them is an error, not an empty
// measurement.
func TestReadGoMetrics(t *testing.T) {
	body := "# TYPE go_goroutines gauge\ngo_goroutines 20012\n" +
		"go_memstats_stack_inuse_bytes 1.31072e+08\n" +
		"go_gc_duration_seconds{quantile=\"0.5\"} 0.001\n" +
		"probegate_requests_total{code=\"200\"} 7\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")
	m, err := readGoMetrics(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["go_goroutines"] != 20012 || m["go_memstats_stack_inuse_bytes"] != 131072000 {
		t.Fatalf("metrics = %v, want go_goroutines 20012 and go_memstats_stack_inuse_bytes 131072000 only", m)
	}

	body = "probegate_requests_total{code=\"200\"} 7\n"
	if _, err := readGoMetrics(context.Background(), admin); err == nil {
		t.Fatal("no go_ samples: want an error")
	}
}
