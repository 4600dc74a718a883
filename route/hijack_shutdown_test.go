package route

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShutdownEndsStreamsOpenedWhileItRuns opens SSE streams over real
// sockets from many clients while Shutdown runs with a short grace: streams
// that never end, and short streams whose connection then waits for a next
// request (parked). Whatever moment each stream registered at, Shutdown
// must end it: every client connection reaches EOF (or a reset) within a
// bound, every upstream request is cancelled and every request settled.
// A stream Shutdown missed would keep its client reading past the bound.
func TestShutdownEndsStreamsOpenedWhileItRuns(t *testing.T) {
	for round := range 3 {
		var active atomic.Int64
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			active.Add(1)
			defer active.Add(-1)
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if strings.Contains(string(b), `"short"`) && i == 1 {
					fmt.Fprint(w, "data: [DONE]\n\n")
					return
				}
				if _, err := fmt.Fprint(w, "data: {}\n\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
		tp := startProxy(t, testConfig(up.URL))

		var (
			wg      sync.WaitGroup
			opened  atomic.Int64
			heads   atomic.Int64 // streams whose answer began
			stop    = make(chan struct{})
			errs    = make(chan error, 64)
			clients = 12
		)
		for c := range clients {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ok, err := streamUntilClosed(tp.addr, c%2 == 0, &heads)
					if err != nil {
						errs <- err
						return
					}
					if !ok {
						return // the proxy no longer accepts
					}
					opened.Add(1)
				}
			})
		}
		// Shutdown comes a round-dependent moment after the first stream
		// was answered, whenever that is on a loaded machine: before it,
		// there would be nothing to end.
		ftPoll(t, 10*time.Second, "a stream answered", func() bool { return heads.Load() > 0 })
		time.Sleep(time.Duration(10+round*40) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_ = tp.Shutdown(ctx)
		cancel()
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Shutdown took %v with a 100ms grace", d)
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if opened.Load() == 0 {
			t.Fatal("no stream was opened")
		}
		ftPoll(t, 3*time.Second, "every request settled", func() bool { return tp.inflight.Load() == 0 })
		ftPoll(t, 3*time.Second, "every upstream request ended", func() bool { return active.Load() == 0 })
		if n := countEntries(&tp.hijacks); n != 0 {
			t.Fatalf("%d hijacked streams left registered after Shutdown", n)
		}
	}
}

// streamUntilClosed opens one streaming completion on a fresh connection
// to addr and reads until the proxy closes the connection. A short stream
// ends by itself; its connection then waits for a next request, which never
// comes, until Shutdown closes it. ok is false when the proxy refused the
// connection or closed it before answering; err when the connection stayed
// open past any Shutdown. heads counts answers that began.
func streamUntilClosed(addr string, short bool, heads *atomic.Int64) (ok bool, err error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false, nil
	}
	defer conn.Close()
	body := `{"stream":true}`
	if short {
		body = `{"stream":true,"x":"short"}`
	}
	if _, err := fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		return false, nil
	}
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return false, err
	}
	br := bufio.NewReader(conn)
	if _, err := br.Peek(1); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, fmt.Errorf("no answer in 5s (short=%v)", short)
		}
		return false, nil
	}
	heads.Add(1)
	_, err = io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true, fmt.Errorf("a stream's connection (short=%v) stayed open 5s: Shutdown missed it", short)
	}
	return true, nil
}
