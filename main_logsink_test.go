package main

import (
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

	"github.com/probegate/probegate/internal/vllmsim"
)

// heldWriter takes no write until released, like a stderr pipe whose
// reader (a log collector, a paused container runtime) stopped reading.
type heldWriter struct {
	release chan struct{}
	once    sync.Once
	buf     syncBuf
}

func (h *heldWriter) Write(p []byte) (int, error) {
	<-h.release
	return h.buf.Write(p)
}

func (h *heldWriter) open() { h.once.Do(func() { close(h.release) }) }

// With the access log on (the default), a stderr that takes no writes does
// not stall requests: they are answered while the lines wait, and the
// lines come out once stderr drains.
func TestStalledStderrDoesNotStallRequests(t *testing.T) {
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.05
	fleet, err := vllmsim.StartFleet(1, "127.0.0.1", 0, sim)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := fmt.Sprintf("server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"127.0.0.1:0\"\nbackends:\n  static: [%q]\nlog:\n  access: true\n", fleet.URLs()[0])
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &heldWriter{release: make(chan struct{})}
	defer stderr.open()
	sig := make(chan os.Signal, 1)
	ready := make(chan [2]string, 1)
	exit := make(chan int, 1)
	go func() { exit <- run([]string{"-config", path}, io.Discard, stderr, sig, ready) }()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case code := <-exit:
		t.Fatalf("exited %d", code)
	case <-time.After(10 * time.Second):
		t.Fatal("proxy did not start")
	}
	c := &http.Client{Timeout: 5 * time.Second}
	const n = 50
	for i := range n {
		resp, err := c.Post("http://"+addrs[0]+"/v1/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"request %d","max_tokens":2}`, sim.Model, i)))
		if err != nil {
			t.Fatalf("request %d with stderr stalled: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	resp, err := c.Get("http://" + addrs[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "probegate_log_dropped_total 0") {
		t.Errorf("/metrics lacks probegate_log_dropped_total 0")
	}
	if got := stderr.buf.String(); got != "" {
		t.Fatalf("stderr took writes while held: %q", got)
	}
	stderr.open()
	waitFor(t, func() bool { return strings.Count(stderr.buf.String(), `"message":"request"`) == n }, "the held access lines written once stderr drains")
	sig <- syscall.SIGTERM
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
	if !strings.Contains(stderr.buf.String(), `"message":"stopped"`) {
		t.Errorf("the last line (stopped) is missing from stderr")
	}
}
