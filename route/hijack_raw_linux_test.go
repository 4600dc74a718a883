//go:build linux

package route

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHijackedPumpWritesRaw: a stream pumped over a hijacked TCP client
// connection writes through the raw socket of its clientConn (raw
// write(2) calls, see rawconn.Socket and hijackState.w), and the client gets
// every frame and the end of the stream.
func TestHijackedPumpWritesRaw(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"i\":0}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"i\":1}\n\ndata: [DONE]\n\n")
	})
	tp := startProxy(t, testConfig(up.URL))
	conn, br := openRawStream(t, tp.addr)
	defer conn.Close()
	streams := 0
	tp.hijacks.each(func(e *hijackEntry) {
		streams++
		if w := e.s.hj.w; w == nil || !w.OK() {
			t.Errorf("the pump writes through %+v, want the clientConn's raw socket", w)
		}
	})
	if streams != 1 {
		t.Fatalf("%d hijacked streams registered, want 1", streams)
	}
	// The reads above race with the stream's recycle at its end unless
	// ordered before it: the stream's only order with the test is the
	// socket, which the race detector does not see. Every stream loads
	// stopping before it is recycled (park, drop), so a store of its
	// current value here orders the reads first without changing it.
	tp.hijacks.stopping.Store(false)
	close(release)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var rest strings.Builder
	for !strings.Contains(rest.String(), "0\r\n\r\n") {
		line, err := br.ReadString('\n')
		rest.WriteString(line)
		if err != nil {
			t.Fatalf("after %q: %v", rest.String(), err)
		}
	}
	if !strings.Contains(rest.String(), `data: {"i":1}`) || !strings.Contains(rest.String(), "data: [DONE]") {
		t.Fatalf("rest of the stream %q", rest.String())
	}
}
