package probe

import (
	"os"
	"testing"
)

// TestWriteTestdata regenerates testdata/vllm_metrics.txt from vllmMetrics:
//
//	PROBE_WRITE_TESTDATA=1 go test -run TestWriteTestdata ./probe/
func TestWriteTestdata(t *testing.T) {
	if os.Getenv("PROBE_WRITE_TESTDATA") == "" {
		t.Skip("set PROBE_WRITE_TESTDATA=1 to regenerate testdata/vllm_metrics.txt")
	}
	if err := os.WriteFile("testdata/vllm_metrics.txt", realisticMetrics(), 0o644); err != nil {
		t.Fatal(err)
	}
}
