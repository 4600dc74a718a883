package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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
func TestOpenLoopThroughLeanTransport(t *testing.T) {
	up, err := startFastUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, netHTTP := range []bool{false, true} {
		v := OpenLoop(context.Background(), "http://"+up.Addr()+"/v1/completions", 300, time.Second, netHTTP)
		if v.Success != 1 || v.Requests < 270 || v.Requests > 330 {
			t.Errorf("net/http %v: run = %+v, want ~300 requests, all answered", netHTTP, v)
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
