package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// signalFleet starts n fast simulated pods.
func signalFleet(t *testing.T, n int) (*vllmsim.Fleet, string) {
	t.Helper()
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.1
	f, err := vllmsim.StartFleet(n, "127.0.0.1", 0, sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, sim.Model
}

func signalConfig(t *testing.T, path, backend string, queueWeight float64, grace time.Duration) {
	t.Helper()
	cfg := fmt.Sprintf(`server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  shutdown_grace: %s
backends:
  static: ["%s"]
route:
  policy: least_inflight
  weights: {queue: %g, kv_cache: 2, prefix: 3, lora: 1}
log:
  access: false
`, grace, backend, queueWeight)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startRun runs the program on path and returns its addresses, its signal
// channel, its logs and its exit code channel.
func startRun(t *testing.T, path string) ([2]string, chan os.Signal, *syncBuf, chan int) {
	t.Helper()
	sig := make(chan os.Signal, 1)
	ready := make(chan [2]string, 1)
	logs := &syncBuf{}
	exit := make(chan int, 1)
	go func() { exit <- run([]string{"-config", path}, io.Discard, logs, sig, ready) }()
	select {
	case addrs := <-ready:
		return addrs, sig, logs, exit
	case code := <-exit:
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("proxy did not start")
	}
	return [2]string{}, nil, nil, nil
}

// stream posts a long streaming completion, waits for its first frame and
// returns a channel delivering the rest of the body once it ends.
func stream(t *testing.T, addr, model string, tokens int) <-chan string {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":"signal","max_tokens":%d,"ignore_eos":true,"stream":true}`, model, tokens)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		b, err := io.ReadAll(br)
		if err != nil {
			b = append(b, "\nread error: "+err.Error()...)
		}
		out <- string(b)
	}()
	return out
}

func finished(t *testing.T, c <-chan string, what string) {
	t.Helper()
	select {
	case b := <-c:
		if !strings.HasSuffix(b, "data: [DONE]\n\n") || strings.Contains(b, `"error"`) {
			t.Fatalf("%s: stream did not finish cleanly: ...%q", what, b[max(0, len(b)-200):])
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: stream hung", what)
	}
}

// SIGTERM finishes in-flight streams within server.shutdown_grace, refuses
// new connections at once, and exits 0.
func TestSIGTERMDrainsStreamsAndExitsZero(t *testing.T) {
	fleet, model := signalFleet(t, 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	signalConfig(t, path, fleet.URLs()[0], 2, 10*time.Second)
	addrs, sig, logs, exit := startRun(t, path)

	s := stream(t, addrs[0], model, 1500)
	sent := time.Now()
	sig <- syscall.SIGTERM
	waitFor(t, func() bool {
		c, err := net.DialTimeout("tcp", addrs[0], 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, "new connections refused while draining")
	finished(t, s, "in-flight stream during SIGTERM")
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM: %s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit within server.shutdown_grace")
	}
	if d := time.Since(sent); d > 10*time.Second {
		t.Fatalf("shutdown took %v, more than server.shutdown_grace", d)
	}
}

// SIGTERM with a stream that outlives server.shutdown_grace: the stream is
// cut at the grace and the process still exits 0.
func TestSIGTERMCutsStreamsAtTheGrace(t *testing.T) {
	fleet, model := signalFleet(t, 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	signalConfig(t, path, fleet.URLs()[0], 2, 300*time.Millisecond)
	addrs, sig, logs, exit := startRun(t, path)
	s := stream(t, addrs[0], model, 100000)
	sent := time.Now()
	sig <- syscall.SIGTERM
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, logs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit after server.shutdown_grace")
	}
	if d := time.Since(sent); d > 3*time.Second {
		t.Fatalf("exit took %v with a 300ms grace", d)
	}
	select {
	case <-s:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's stream was left hanging after exit")
	}
}

// SIGHUP with an invalid file keeps the old configuration serving and logs
// each problem by its YAML path; a valid reload changes backends and weights
// without dropping in-flight streams.
func TestSIGHUPReloadUnderStreams(t *testing.T) {
	fleet, model := signalFleet(t, 2)
	path := filepath.Join(t.TempDir(), "config.yaml")
	signalConfig(t, path, fleet.URLs()[0], 2, 10*time.Second)
	addrs, sig, logs, exit := startRun(t, path)

	s1 := stream(t, addrs[0], model, 1200)
	os.WriteFile(path, []byte("route:\n  d: -1\n  policy: fastest\nprobe:\n  dedline: 5ms\nupstream:\n  idle_timeout: soon\n"), 0o600)
	sig <- syscall.SIGHUP
	for _, key := range []string{"route.d", "route.policy", "probe.dedline", "upstream.idle_timeout"} {
		waitFor(t, func() bool { return strings.Contains(logs.String(), `"key":"`+key) }, "rejection of "+key+" logged by its path")
	}
	s2 := stream(t, addrs[0], model, 1200) // the old config still serves

	signalConfig(t, path, fleet.URLs()[1], 5, 10*time.Second)
	sig <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(logs.String(), "configuration reloaded") }, "valid reload applied")
	finished(t, s1, "stream started before both reloads")
	finished(t, s2, "stream started after the rejected reload")
	resp, err := http.Get("http://" + addrs[1] + "/debug/backends")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), fleet.Addrs()[1]) || strings.Contains(string(b), `"`+fleet.Addrs()[0]+`"`) {
		t.Fatalf("backends after reload: %s", b)
	}
	s3 := stream(t, addrs[0], model, 50)
	finished(t, s3, "stream after the reload")
	if st := fleet.Servers()[1].Stats(); st.Finished() < 1 {
		t.Fatalf("the new backend finished %d requests", st.Finished())
	}
	sig <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
}
