package route

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// A keep-alive connection whose idle wait is past its release time when
// the proxy's goroutine first reads (the process was stopped between the
// previous answer and that read, as under starve.sh) while the client's
// next request already waits in the socket: the read fails at once on the
// past deadline, the connection is released (readIdle) and handed back
// by releaseIdle, and the waiting request is answered, here a 413 with its
// envelope. This was the suspect of TestRefusalsCountedUnderNone's one
// EOF (s13, s15: a 413 on a reused connection closed unanswered); the path
// holds, so that EOF's cause is elsewhere (hostile-s16.md). With
// releaseIdle closing what it released instead of serving it, the client
// reads EOF here.
func TestReleasedConnectionServesTheRequestAlreadyWaiting(t *testing.T) {
	c := testConfig(deadAddr(t))
	c.Route.AllowPaths = []string{"/v1/*"}
	c.Server.MaxBodyBytes = 8
	tp := startProxy(t, c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// The connection as fasthttp leaves it after an answer: written, then
	// the idle deadline asked, here as if 2 s ago (clientIdleRelease is 1 s).
	cc := tp.wrapClient(raw, nil)
	if _, err := cc.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = cc.SetReadDeadline(time.Now().Add(clientIdleTimeout - 2*time.Second))
	if _, err := client.Write([]byte("POST /v1/models HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\n\r\n{\"too\":\"long\"}")); err != nil {
		t.Fatal(err)
	}
	if !waitReadable(raw, 10*time.Second) {
		t.Fatal("the request never reached the proxy's socket")
	}
	if n, err := cc.Read(make([]byte, 4096)); n != 0 || err == nil {
		t.Fatalf("the late idle read: %d bytes, %v; want a release (0, EOF)", n, err)
	}
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(client)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 404 {
		t.Fatalf("the earlier answer: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request waiting at the release: %v", err)
	}
	envelope(t, resp, 413)
}
