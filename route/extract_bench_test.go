package route

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// adversarialBody builds a request body of about size bytes in one of the
// shapes that made a full-tree parser amplify its input.
func adversarialBody(shape string, size int) []byte {
	var b strings.Builder
	b.Grow(size + 64)
	switch shape {
	case "int-array": // {"model":"m","prompt":[0,0,...]}
		b.WriteString(`{"model":"m","prompt":[0`)
		for b.Len() < size {
			b.WriteString(",0")
		}
		b.WriteString(`]}`)
	case "tiny-messages": // many one-character chat messages
		b.WriteString(`{"model":"m","messages":[{"role":"user","content":"a"}`)
		for b.Len() < size {
			b.WriteString(`,{"role":"user","content":"a"}`)
		}
		b.WriteString(`]}`)
	case "deep-nesting": // an unknown field nested size/2 deep, then the model
		n := size / 2
		b.WriteString(`{"x":`)
		b.WriteString(strings.Repeat("[", n))
		b.WriteString(strings.Repeat("]", n))
		b.WriteString(`,"model":"m","prompt":"hi"}`)
	case "huge-string": // one prompt string of the whole size
		b.WriteString(`{"model":"m","prompt":"`)
		b.WriteString(strings.Repeat("x", size))
		b.WriteString(`"}`)
	case "escaped-string": // a prompt string of \u escapes
		b.WriteString(`{"model":"m","prompt":"`)
		for b.Len() < size {
			b.WriteString(`\u00e9`)
		}
		b.WriteString(`"}`)
	case "content-parts": // one message with many tiny text parts
		b.WriteString(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}`)
		for b.Len() < size {
			b.WriteString(`,{"type":"text","text":"a"}`)
		}
		b.WriteString(`]}]}`)
	case "model-last": // the fields the router needs after a huge unknown field
		b.WriteString(`{"x":"`)
		b.WriteString(strings.Repeat("y", size))
		b.WriteString(`","stream":true,"model":"m","prompt":"hi"}`)
	}
	return []byte(b.String())
}

var adversarialShapes = []string{"int-array", "tiny-messages", "deep-nesting", "huge-string", "escaped-string", "content-parts", "model-last"}

// BenchmarkExtractAdversarial measures Extract over adversarial bodies up
// to the default server.max_body_bytes (16 MiB): cpu-ms/op is the process's
// CPU time per body (user+system, GC included; ns/op is wall time, which a
// shared machine inflates), B/op the memory it allocates per body (its transient cost),
// and retained-B what is still live on the heap after the loop and a GC
// (kept by the extractor across requests). Sizes: BENCH_EXTRACT_MIB, a
// comma-separated list (default 1,16).
func BenchmarkExtractAdversarial(b *testing.B) {
	sizes := []int{1, 16}
	if s := benchEnv("BENCH_EXTRACT_MIB"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	for _, mib := range sizes {
		for _, shape := range adversarialShapes {
			body := adversarialBody(shape, mib<<20)
			b.Run(fmt.Sprintf("shape=%s/size=%dMiB", shape, mib), func(b *testing.B) {
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := new(extractor)
				var info RequestInfo
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				cpu0 := processCPU()
				for b.Loop() {
					e.Extract(body, 256, 64, &info)
				}
				b.StopTimer()
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
				var after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
				if retained < 0 {
					retained = 0
				}
				b.ReportMetric(float64(retained), "retained-B")
				runtime.KeepAlive(e)
			})
		}
	}
}

func benchEnv(k string) string { return os.Getenv(k) }
