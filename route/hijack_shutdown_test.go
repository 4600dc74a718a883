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
// bound after Shutdown returned, every upstream request is cancelled and
// every request settled. A stream Shutdown missed would keep its client
// reading past the bound.
//
// The bound runs from Shutdown's return (shutdownBound), not from each
// request: a starved -race process (s13: the route suite at load 15-21,
// SCHED_IDLE) took more than 5 s from the clients' first requests to the
// first answer, and every client failed its first stream's 5 s bound
// before Shutdown began ("no stream was opened").
func TestShutdownEndsStreamsOpenedWhileItRuns(t *testing.T) {
	for round := range 3 {
		var active atomic.Int64
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			active.Add(1)
			defer active.Add(-1)
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if err := sseFrame(w, r, i, strings.Contains(string(b), `"short"`)); err != nil {
					return
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
			bound   shutdownBound
		)
		for c := range clients {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ok, err := streamUntilClosed(tp.addr, c%2 == 0, &heads, &bound)
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
		bound.arm(shutdownReadBound)
		// Shutdown's own bound is the grace, then up to cutSettleWait for
		// the cut streams to settle: well under a second on a quiet
		// machine, 3.4 s once at load 16 (SCHED_IDLE, -race). A Shutdown
		// that did not cut would wait for the clients, which give up only
		// at shutdownSafety.
		if d := time.Since(start); d > shutdownSafety/3 {
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
		ftPoll(t, 10*time.Second, "every request settled", func() bool { return tp.inflight.Load() == 0 })
		ftPoll(t, 10*time.Second, "every upstream request ended", func() bool { return active.Load() == 0 })
		if n := countEntries(&tp.hijacks); n != 0 {
			t.Fatalf("%d hijacked streams left registered after Shutdown", n)
		}
	}
}

// sseFrame writes the i-th frame of an SSE stream that goes on until the
// client leaves, 10 ms apart, or that ends after one frame when short; it
// returns an error once the stream is over.
func sseFrame(w http.ResponseWriter, r *http.Request, i int, short bool) error {
	if short && i == 1 {
		fmt.Fprint(w, "data: [DONE]\n\n")
		return io.EOF
	}
	if _, err := fmt.Fprint(w, "data: {}\n\n"); err != nil {
		return err
	}
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
		return r.Context().Err()
	case <-time.After(10 * time.Millisecond):
		return nil
	}
}

// shutdownReadBound is how long after Shutdown returned a client's
// connection may stay open before the test calls it missed.
const shutdownReadBound = 5 * time.Second

// shutdownBound holds the client connections of a round and, once armed
// (after Shutdown returned), the deadline every one of them must reach
// EOF by. Until then the connections read with no deadline of their own
// but a safety one (shutdownSafety) that keeps a broken test from hanging.
type shutdownBound struct {
	mu    sync.Mutex
	by    time.Time // zero until armed
	conns map[net.Conn]struct{}
}

// shutdownSafety bounds a client's read in a round whose Shutdown never
// returned; a missed stream fails against the armed bound long before.
const shutdownSafety = 60 * time.Second

// arm sets the deadline d from now on every connection held and on every
// one added later.
func (b *shutdownBound) arm(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.by = time.Now().Add(d)
	for c := range b.conns {
		_ = c.SetReadDeadline(b.by)
	}
}

// add holds c and gives it the armed deadline, or the safety one.
func (b *shutdownBound) add(c net.Conn) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		b.conns = map[net.Conn]struct{}{}
	}
	b.conns[c] = struct{}{}
	if b.by.IsZero() {
		return c.SetReadDeadline(time.Now().Add(shutdownSafety))
	}
	return c.SetReadDeadline(b.by)
}

// remove forgets c.
func (b *shutdownBound) remove(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// streamUntilClosed opens one streaming completion on a fresh connection
// to addr and reads until the proxy closes the connection. A short stream
// ends by itself; its connection then waits for a next request, which never
// comes, until Shutdown closes it. ok is false when the proxy refused the
// connection or closed it before answering; err when the connection stayed
// open past bound's deadline (shutdownReadBound after Shutdown returned).
// heads counts answers that began.
func streamUntilClosed(addr string, short bool, heads *atomic.Int64, bound *shutdownBound) (ok bool, err error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false, nil
	}
	defer conn.Close()
	if err := bound.add(conn); err != nil {
		return false, err
	}
	defer bound.remove(conn)
	body := `{"stream":true}`
	if short {
		body = `{"stream":true,"x":"short"}`
	}
	if _, err := fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		return false, nil
	}
	br := bufio.NewReader(conn)
	if _, err := br.Peek(1); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, fmt.Errorf("no answer and no close %v after Shutdown returned (short=%v)", shutdownReadBound, short)
		}
		return false, nil
	}
	heads.Add(1)
	_, err = io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true, fmt.Errorf("a stream's connection (short=%v) stayed open %v after Shutdown returned: Shutdown missed it", short, shutdownReadBound)
	}
	return true, nil
}

// A connection fasthttp accepted just before Shutdown closed the listener,
// but whose accept loop did not run on until Shutdown's grace was over (a
// starved process), is still ended: Shutdown's cut (connSet.closeAll) ran
// before the connection was tracked, and fasthttp, whose own Shutdown gave
// up at the grace, would serve it as if nothing were stopping. Here the
// listener holds the accepted connection until Shutdown returned. Before,
// the stream was served past Shutdown until its client gave up.
func TestShutdownEndsAConnectionAcceptedBeforeItsCut(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if err := sseFrame(w, r, i, false); err != nil {
				return
			}
		}
	})
	p, err := New(Options{Config: testConfig(up.URL)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := &heldListener{Listener: ln, accepted: make(chan struct{}), release: make(chan struct{})}
	served := make(chan struct{})
	go func() { _ = p.Serve(held); close(served) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"stream":true}`
	if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	<-held.accepted
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = p.Shutdown(ctx)
	cancel()
	close(held.release) // the accept loop goes on with the connection
	<-served

	_ = c.SetReadDeadline(time.Now().Add(shutdownReadBound))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection accepted before Shutdown's cut was still open %v after Shutdown returned (read %d bytes: %.60q)", shutdownReadBound, len(got), got)
	}
}

// heldListener is a listener whose first Accept holds the connection it
// accepted until release is closed, having closed accepted: an accept loop
// that did not run on after the accept.
type heldListener struct {
	net.Listener
	once              sync.Once
	accepted, release chan struct{}
}

func (l *heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.once.Do(func() {
		close(l.accepted)
		<-l.release
	})
	return c, nil
}
