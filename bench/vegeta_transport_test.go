package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestLeanTransportExchanges: vegeta's requests go out through the lean
// transport as the targets expect them (method, path, headers, body) and
// their answers come back whole; and the transport keeps no goroutine per
// connection: with 16 keep-alive connections open and idle, the client
// side holds at most its one idle-connection cleaner, where net/http's
// Transport holds a read loop and a write loop for each (32). That per-
// connection hand-off is the generator CPU it exists to save.
func TestLeanTransportExchanges(t *testing.T) {
	const conns = 16
	var mu sync.Mutex
	var got []string
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(conns)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("X-Seq")+" "+string(b))
		mu.Unlock()
		arrived.Done()
		<-release // hold every request so that each takes its own connection
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fastBody)
	}))
	defer srv.Close()
	before := clientGoroutines()
	tp := newLeanTransport(strings.TrimPrefix(srv.URL, "http://"), 64)
	defer tp.CloseIdleConnections()
	client := &http.Client{Transport: tp}

	var wg sync.WaitGroup
	errs := make(chan string, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(overheadBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Seq", string(rune('a'+i)))
			resp, err := client.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != string(fastBody) || resp.ContentLength != int64(len(fastBody)) {
				errs <- resp.Status + " " + string(b)
			}
		}()
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if len(got) != conns {
		t.Fatalf("server saw %d requests, want %d", len(got), conns)
	}
	for _, g := range got {
		if !strings.HasPrefix(g, "POST /v1/completions application/json ") || !strings.HasSuffix(g, " "+overheadBody) {
			t.Errorf("request arrived as %q", g)
		}
	}

	// The connections are idle now; count the client's goroutines (other
	// tests' idle cleaners may linger: count the new ones).
	time.Sleep(50 * time.Millisecond)
	if n := clientGoroutines() - before; n > 1 {
		t.Errorf("%d new client goroutines with %d idle connections, want at most 1 (the idle cleaner)", n, conns)
	}
}

// TestOpenLoopThroughLeanTransport: the overhead scenario's open loop,
// sent through the lean transport, reaches an upstream at its rate and all
// answers are 200.
//
// The run is 1 s of wall clock and the generator stops there, so a starved
// -race process sends fewer (s15, .ci/run at idle priority at load 17: 191
// of 300, every one answered): a run short of 270 with every answer 200
// runs again, up to three times; too many requests, or any failed answer,
// fails at once.
func TestOpenLoopThroughLeanTransport(t *testing.T) {
	up, err := startFastUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, netHTTP := range []bool{false, true} {
		for attempt := 1; ; attempt++ {
			v := OpenLoop(context.Background(), "http://"+up.Addr()+"/v1/completions", 300, time.Second, netHTTP)
			if v.Success == 1 && v.Requests >= 270 && v.Requests <= 330 {
				break
			}
			if v.Success != 1 || v.Requests > 330 || attempt == 3 {
				t.Errorf("net/http %v, attempt %d: run = %+v, want ~300 requests, all answered", netHTTP, attempt, v)
				break
			}
			t.Logf("net/http %v, attempt %d: %d of 300 requests sent in the run's second, all answered (a starved generator); again", netHTTP, attempt, v.Requests)
		}
	}
}

// clientGoroutines counts the goroutines of HTTP clients: net/http's
// connection loops and fasthttp's HostClient (its idle cleaner).
func clientGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "fasthttp.(*HostClient)") {
			n++
		}
	}
	return n
}

// TestLeanTransportReusesTheNewestConnection: after a burst has opened 16
// connections, requests sent one at a time all go out on one connection
// (the newest idle one, as net/http's Transport picks), not in turn on
// each of the 16. With fasthttp's default FIFO order a target that fell
// behind once would keep serving every connection the generator opened
// for the rest of the run, a load the target did not cause.
func TestLeanTransportReusesTheNewestConnection(t *testing.T) {
	// The client's idle-connection cleaner sleeps up to its idle timeout
	// after the connections close; everything else must be gone.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
	const burst, after = 16, 32
	var mu sync.Mutex
	var peers []string
	var arrived sync.WaitGroup
	arrived.Add(burst)
	release := make(chan struct{})
	var held atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		peers = append(peers, r.RemoteAddr)
		mu.Unlock()
		if held.Add(1) <= burst {
			arrived.Done()
			<-release // the burst: each request holds its own connection
		}
		_, _ = w.Write(fastBody)
	}))
	defer srv.Close()
	tp := newLeanTransport(strings.TrimPrefix(srv.URL, "http://"), 64)
	defer tp.CloseIdleConnections()
	client := &http.Client{Transport: tp}
	send := func() error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(overheadBody))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}

	var wg sync.WaitGroup
	errs := make(chan error, burst)
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := send(); err != nil {
				errs <- err
			}
		}()
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range after {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if n := distinct(peers[:burst]); n != burst {
		t.Fatalf("the burst used %d connections, want %d", n, burst)
	}
	if n := distinct(peers[burst:]); n != 1 {
		t.Errorf("%d requests sent one at a time after the burst used %d of its %d connections, want 1 (the newest idle)", after, n, burst)
	}
}

// distinct counts the different strings in s.
func distinct(s []string) int {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return len(m)
}
