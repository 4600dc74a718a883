package probe

import (
	"testing"
)

func TestParseORCA(t *testing.T) {
	tests := []struct {
		name                  string
		header                string
		ok                    bool
		running, waiting, que int
		kv                    float64
	}{
		{"vllm text", "TEXT named_metrics.kv_cache_usage_perc=0.41, named_metrics.num_requests_waiting=3.0", true, -1, 3, -1, 0.41},
		{"old envoy colon", "TEXT named_metrics.kv_cache_usage_perc:0.5,named_metrics.num_requests_waiting:2", true, -1, 2, -1, 0.5},
		{"text with running and other fields", "TEXT cpu_utilization=0.3, rps_fractional=10, named_metrics.num_requests_running=4, named_metrics.num_requests_waiting=1, named_metrics.foo=9", true, 4, 1, 5, -1},
		{"vllm json", `JSON {"named_metrics":{"kv_cache_usage_perc":0.41,"num_requests_waiting":3.0}}`, true, -1, 3, -1, 0.41},
		{"json with other fields", `JSON {"cpu_utilization":0.5,"named_metrics":{"num_requests_running":2,"num_requests_waiting":0,"x":"y"},"eps":1}`, true, 2, 0, 2, -1},
		{"lower-case prefix and blanks", "  text named_metrics.num_requests_waiting = 6 ", true, -1, 6, -1, -1},
		{"kv clamped", "TEXT named_metrics.kv_cache_usage_perc=1.7", true, -1, -1, -1, 1},
		{"bad values ignored", "TEXT named_metrics.num_requests_waiting=NaN, named_metrics.kv_cache_usage_perc=-1, named_metrics.num_requests_running=abc", false, -1, -1, -1, -1},
		{"no load fields", "TEXT cpu_utilization=0.3, mem_utilization=0.2", false, -1, -1, -1, -1},
		{"binary", "BIN CgQIARAC", false, -1, -1, -1, -1},
		{"no prefix", "named_metrics.num_requests_waiting=3", false, -1, -1, -1, -1},
		{"bad json", `JSON {"named_metrics":`, false, -1, -1, -1, -1},
		{"json string value", `JSON {"named_metrics":{"num_requests_waiting":"3"}}`, false, -1, -1, -1, -1},
		{"empty", "", false, -1, -1, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, ok := ParseORCA([]byte(tt.header), t0)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if l.Running != tt.running || l.Waiting != tt.waiting || l.Queue() != tt.que || l.KVUse != tt.kv || l.Source != SourceORCA || !l.At.Equal(t0) {
				t.Errorf("got %+v", l)
			}
		})
	}
}

// FuzzParseORCA: never panics; ok means at least one metric was read and
// every known value is in range.
func FuzzParseORCA(f *testing.F) {
	for _, s := range []string{
		"TEXT named_metrics.kv_cache_usage_perc=0.41, named_metrics.num_requests_waiting=3.0",
		"TEXT named_metrics.kv_cache_usage_perc:0.41",
		`JSON {"named_metrics":{"kv_cache_usage_perc":0.41,"num_requests_waiting":3.0}}`,
		"BIN CgQIARAC", "TEXT ,,,=:", `JSON {"named_metrics":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		l, ok := ParseORCA(h, t0)
		if !ok {
			return
		}
		if l.Running == -1 && l.Waiting == -1 && l.KVUse == -1 {
			t.Fatal("ok without a metric")
		}
		if l.Running < -1 || l.Waiting < -1 || (l.KVUse != -1 && (l.KVUse < 0 || l.KVUse > 1)) || l.ServerLoad != -1 {
			t.Fatalf("bad load %+v", l)
		}
	})
}

func BenchmarkParseORCA(b *testing.B) {
	for _, c := range []struct{ name, h string }{
		{"text", "TEXT named_metrics.kv_cache_usage_perc=0.41, named_metrics.num_requests_waiting=3.0"},
		{"json", `JSON {"named_metrics":{"kv_cache_usage_perc":0.41,"num_requests_waiting":3.0}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := []byte(c.h)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ParseORCA(h, t0); !ok {
					b.Fatal("not ok")
				}
			}
		})
	}
}
