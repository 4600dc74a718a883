package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -check refuses a configuration whose admin listener overlaps the client
// listener (the same port on every address and on loopback), exit 2, the
// message naming both keys: the bind would fail at start.
func TestCheckRefusesOverlappingListeners(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overlap.yaml")
	cfg := "server:\n  listen: \":8080\"\n  admin_listen: \"127.0.0.1:8080\"\nbackends:\n  static: [\"http://127.0.0.1:8001\"]\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-config", path, "-check"}, &out, &errb, nil, nil); code != 2 {
		t.Fatalf("-check: exit %d, want 2 (stdout %q, stderr %q)", code, out.String(), errb.String())
	}
	if s := errb.String(); !strings.Contains(s, "server.admin_listen:") || !strings.Contains(s, "server.listen") {
		t.Errorf("-check output does not name both keys:\n%s", s)
	}
}
