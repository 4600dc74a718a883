package route

import (
	"strings"
	"testing"
	"time"
)

// The exported ticket moves a backend's pending work exactly as the proxy's
// own accounting does: prompt and expected output at dispatch, the prompt
// back at the first byte, the rest at the end.
func TestWorkTicketRoundTrip(t *testing.T) {
	var m Memory
	b := NewBackend("10.0.0.1:8000", 64)
	info := RequestInfo{JSON: true, Stream: true, IgnoreEOS: true, PromptTokens: 1000, MaxTokens: 40, ModelHash: 7}
	t0 := time.Unix(1000, 0)
	tk := m.BeginWork(&info, b, 64, 128, t0)
	if p, d, _ := b.State().Work(); p != 1000 || d != 40 {
		t.Fatalf("after BeginWork: prefill %v decode %v, want 1000 and 40", p, d)
	}
	tk.SawBytes(b, []byte("data: {}\n\n"), t0.Add(100*time.Millisecond))
	p, d, ns := b.State().Work()
	if p != 0 || d != 40 {
		t.Fatalf("after the first byte: prefill %v decode %v, want 0 and 40", p, d)
	}
	if ns != float64(100*time.Millisecond)/1000 {
		t.Errorf("learned %v ns per token, want 100 µs per token", ns)
	}
	m.EndWork(b, &tk, true)
	if p, d, _ := b.State().Work(); p != 0 || d != 0 {
		t.Fatalf("after EndWork: prefill %v decode %v, want none", p, d)
	}
}

func TestExtractInfoReadsACompletionBody(t *testing.T) {
	text := strings.Repeat("abcd", 300) // 1,200 characters, 300 tokens
	var info RequestInfo
	ExtractInfo([]byte(`{"model":"m","prompt":"`+text+`","max_tokens":7,"ignore_eos":true,"stream":true}`), 256, 64, &info)
	if !info.JSON || info.PromptTokens != 300 || info.MaxTokens != 7 || !info.IgnoreEOS || !info.Stream || info.NBlocks != 4 || string(info.Model) != "m" {
		t.Fatalf("got %+v", info)
	}
}
