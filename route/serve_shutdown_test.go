package route

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestServeAfterShutdownReturns: a Serve goroutine that gets to its
// listener only after Shutdown (a SIGTERM right at start, or a test that
// ends at once on a loaded machine) returns at once and closes the
// listener, instead of accepting forever: fasthttp's own Shutdown closes
// only the listeners its Serve had registered.
func TestServeAfterShutdownReturns(t *testing.T) {
	p, err := New(Options{Config: testConfig("http://127.0.0.2:9")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		_ = ln.Close()
		<-done
		t.Fatal("Serve after Shutdown did not return")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the listener Serve was given still accepts connections")
	}
}

// TestShutdownStopsServe: the usual order, Serve then Shutdown, still
// returns Serve once Shutdown ran.
func TestShutdownStopsServe(t *testing.T) {
	p, err := New(Options{Config: testConfig("http://127.0.0.2:9")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	// Wait until Serve accepts: a connection is answered (closed or served).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
}
