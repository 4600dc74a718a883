package bench

import (
	"os"
	"runtime"
	"testing"
)

func TestRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	self, byPid := RSS(0), RSS(os.Getpid())
	if self < 1<<20 {
		t.Fatalf("RSS(0) = %d bytes, want at least 1 MiB for a Go test binary", self)
	}
	if byPid < self/2 || byPid > self*2 {
		t.Fatalf("RSS(pid) = %d, RSS(0) = %d: the same process read two ways", byPid, self)
	}
	if RSS(1<<30) != 0 {
		t.Fatal("a process that does not exist has an RSS")
	}
}
