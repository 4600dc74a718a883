package route

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// sendThenRead is a client that does not read while it sends: it writes
// head and payload more bytes in one write (ignoring a write error: the
// proxy may have refused and closed already), then reads everything the
// proxy sent until EOF or an error. It returns what it read, how long the
// read took and the error that ended it (nil for EOF).
func sendThenRead(t *testing.T, addr, head string, payload int) ([]byte, time.Duration, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(append([]byte(head), bytes.Repeat([]byte("y"), payload)...))
	start := time.Now()
	var got bytes.Buffer
	_, err = got.ReadFrom(c)
	return got.Bytes(), time.Since(start), err
}

// wantEnvelope fails unless raw is one whole HTTP response with status
// and vLLM's error envelope as its body.
func wantEnvelope(t *testing.T, raw []byte, readErr error, status int) {
	t.Helper()
	if readErr != nil {
		t.Fatalf("reading the %d: %v after %d bytes (%q)", status, readErr, len(raw), raw)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("not a response: %v (%q)", err, raw)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d (%q)", resp.StatusCode, status, raw)
	}
	var env struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("body is not the error envelope: %v (%q)", err, raw)
	}
	if env.Error.Code != status || env.Error.Message == "" {
		t.Fatalf("bad envelope %+v", env)
	}
}

// A client still sending when the proxy refuses its request gets the whole
// refusal: the proxy ends the connection with a lingering close (FIN, then
// it reads and discards what the client still sends), so the client's
// unread bytes never make the kernel answer with a reset that destroys the
// response. The client here sends 128 KiB more after the refusal before it
// reads anything, which makes the reset certain without the linger.
func TestRefusalSurvivesAClientStillSending(t *testing.T) {
	const more = 128 << 10
	cases := []struct {
		name   string
		status int
		head   string
	}{
		{"431 headers too large", 431, "GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Big: "},
		{"413 body too large", 413, "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n"},
		{"400 malformed", 400, "GET /v1/models HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
			cfg := testConfig(up.URL)
			cfg.Server.MaxHeaderBytes = 4096
			cfg.Server.MaxBodyBytes = 1024
			tp := startProxy(t, cfg)
			raw, took, err := sendThenRead(t, tp.addr, tc.head, more)
			wantEnvelope(t, raw, err, tc.status)
			// The proxy shuts its side down right after the response, so
			// the client sees EOF at once, not when the linger ends.
			if took > lingerTime/2 {
				t.Fatalf("response and EOF took %v, want well under the linger bound %v", took, lingerTime)
			}
			if !strings.Contains(string(raw), "Connection: close") {
				t.Fatalf("refusal does not announce the close: %q", raw)
			}
		})
	}
}

// The linger is bounded: a client that never stops sending costs the proxy
// at most lingerMaxBytes read and lingerTime waited, and one that closes,
// or a Shutdown cutting connections, ends it at once.
func TestLingerIsBounded(t *testing.T) {
	// trickle writes a byte to c every pause until c is closed.
	trickle := func(c net.Conn, pause time.Duration) {
		for {
			if _, err := c.Write([]byte{'y'}); err != nil {
				return
			}
			time.Sleep(pause)
		}
	}
	t.Run("a fast sender is cut at lingerMaxBytes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, cli := net.Pipe()
			defer cli.Close()
			go func() {
				// Four times the bound, and the connection stays open.
				b := make([]byte, 4*lingerMaxBytes)
				_, _ = cli.Write(b)
			}()
			start := time.Now()
			n := linger(srv, lingerTime, lingerMaxBytes)
			srv.Close()
			if n != lingerMaxBytes {
				t.Fatalf("discarded %d bytes, want the bound %d", n, lingerMaxBytes)
			}
			if el := time.Since(start); el != 0 {
				t.Fatalf("took %v, want no wait: the byte bound came first", el)
			}
		})
	})
	t.Run("a trickling sender is cut at lingerTime", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, cli := net.Pipe()
			done := make(chan struct{})
			go func() { trickle(cli, 10*time.Millisecond); close(done) }()
			start := time.Now()
			n := linger(srv, lingerTime, lingerMaxBytes)
			el := time.Since(start)
			srv.Close()
			<-done // its next write fails
			cli.Close()
			if el != lingerTime {
				t.Fatalf("lingered %v, want the bound %v", el, lingerTime)
			}
			if want := int(lingerTime / (10 * time.Millisecond)); n < want-1 || n > want+1 {
				t.Fatalf("discarded %d bytes, want about %d (all it was sent)", n, want)
			}
		})
	})
	t.Run("a client that closes ends it at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, cli := net.Pipe()
			go func() { _, _ = cli.Write(make([]byte, 100)); cli.Close() }()
			start := time.Now()
			n := linger(srv, lingerTime, lingerMaxBytes)
			srv.Close()
			if el := time.Since(start); n != 100 || el != 0 {
				t.Fatalf("discarded %d bytes in %v, want 100 at once", n, el)
			}
		})
	})
	t.Run("a second Close (Shutdown's cut) ends it at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, cli := net.Pipe()
			defer cli.Close()
			cc := newClientConn(srv, nil)
			cc.lingerOnClose.Store(true)
			done := make(chan time.Duration)
			start := time.Now()
			go func() { _ = cc.Close(); done <- time.Since(start) }()
			synctest.Wait() // the first Close is lingering, blocked in a read
			_ = cc.Close()
			if el := <-done; el != 0 {
				t.Fatalf("lingering Close returned after %v, want at once", el)
			}
		})
	})
}
