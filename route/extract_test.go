package route

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	long := strings.Repeat("abcdefgh", 64) // 512 chars: 2 blocks of 256
	cases := []struct {
		name       string
		body       string
		json       bool
		model      string
		stream     bool
		wantBlocks int
	}{
		{"not json", "hello there", false, "", false, 0},
		{"json array is not an object", `[1,2]`, false, "", false, 0},
		{"empty", ``, false, "", false, 0},
		{"completions string prompt", `{"model":"m","prompt":"` + long + `","stream":true}`, true, "m", true, 2},
		{"short prompt has no full block", `{"model":"m","prompt":"hi"}`, true, "m", false, 0},
		{"token ids", `{"model":"m","prompt":[` + strings.Repeat("12345,", 100) + `1]}`, true, "m", false, 2},
		{"chat string content", `{"model":"lora-a","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"x"}]}`, true, "lora-a", false, 2},
		{"chat parts content", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, true, "m", false, 2},
		{"stream false", `{"model":"m","stream":false,"prompt":"x"}`, true, "m", false, 0},
		{"stream not bool", `{"model":"m","stream":"yes","prompt":"x"}`, true, "m", false, 0},
		{"model not string", `{"model":7,"prompt":"x"}`, true, "", false, 0},
		// Of a repeated key the last counts, as vLLM (Python's json)
		// reads it, also when a key is spelled with escapes.
		{"repeated keys", `{"model":"a","stream":true,"prompt":"x","model":"b","stream":false}`, true, "b", false, 0},
		{"repeated stream key escaped", `{"stream":true,"\u0073\u0074\u0072\u0065\u0061\u006d":false,"prompt":"x"}`, true, "", false, 0},
		{"stream key escaped", `{"model":"m","\u0073\u0074\u0072\u0065\u0061\u006d":true,"prompt":"x"}`, true, "m", true, 0},
	}
	var e extractor
	var info RequestInfo
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.Extract([]byte(c.body), 256, 64, &info)
			if info.JSON != c.json || string(info.Model) != c.model || info.Stream != c.stream || info.NBlocks != c.wantBlocks {
				t.Fatalf("got json=%v model=%q stream=%v blocks=%d; want %v %q %v %d",
					info.JSON, info.Model, info.Stream, info.NBlocks, c.json, c.model, c.stream, c.wantBlocks)
			}
		})
	}
}

// TestExtractSizes checks the prompt-token estimate and the output bounds
// the token-aware load counts: ids count one each, text 4 bytes a token
// (rounded up) over the whole prompt, not only its hashed prefix.
func TestExtractSizes(t *testing.T) {
	huge := strings.Repeat("abcd", 5000) // 20,000 bytes: beyond the 64 hashed blocks
	cases := []struct {
		name      string
		body      string
		tokens    int
		maxTokens int
		ignoreEOS bool
	}{
		{"string prompt, whole length", `{"prompt":"` + huge + `","max_tokens":7,"ignore_eos":true}`, 5000, 7, true},
		{"rounded up", `{"prompt":"abcde"}`, 2, 0, false},
		{"token ids", `{"prompt":[1,2,3,4,5],"max_tokens":3}`, 5, 3, false},
		{"batch of strings and ids", `{"prompt":["abcdefgh",[1,2,3]]}`, 5, 0, false},
		{"chat: role, separators and text of every message", `{"messages":[{"role":"user","content":"` + huge + `"},{"role":"assistant","content":[{"type":"text","text":"abcd"}]}],"max_completion_tokens":9}`,
			(4 + 2 + 20000 + 9 + 2 + 4 + 3) / 4, 9, false},
		{"max_tokens wins over max_completion_tokens", `{"prompt":"x","max_tokens":5,"max_completion_tokens":9}`, 1, 5, false},
		{"bad max_tokens ignored", `{"prompt":"x","max_tokens":-3,"ignore_eos":"yes"}`, 1, 0, false},
		{"float max_tokens ignored", `{"prompt":"x","max_tokens":2.5}`, 1, 0, false},
		{"max_tokens over the cap", `{"prompt":"x","max_tokens":999999999999999999,"ignore_eos":true}`, 1, maxTokensCap, true},
		{"max_tokens of any length", `{"prompt":"x","max_completion_tokens":123456789012345678901234567890}`, 1, maxTokensCap, false},
		{"max_tokens at the cap", `{"prompt":"x","max_tokens":16777216}`, 1, maxTokensCap, false},
		{"max_tokens under the cap", `{"prompt":"x","max_tokens":16777215}`, 1, maxTokensCap - 1, false},
		{"leading zeros", `{"prompt":"x","max_tokens":0000000000000000000000012}`, 1, 12, false},
		{"no prompt", `{"model":"m"}`, 0, 0, false},
	}
	var e extractor
	var info RequestInfo
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.Extract([]byte(c.body), 256, 64, &info)
			if info.PromptTokens != c.tokens || info.MaxTokens != c.maxTokens || info.IgnoreEOS != c.ignoreEOS {
				t.Fatalf("got tokens=%d max=%d ignore_eos=%v; want %d %d %v", info.PromptTokens, info.MaxTokens, info.IgnoreEOS, c.tokens, c.maxTokens, c.ignoreEOS)
			}
		})
	}
}

func TestExtractPrefixChainsAndSalts(t *testing.T) {
	var e extractor
	var a, b, c, d RequestInfo
	sys := strings.Repeat("You are a helpful assistant. ", 40) // > 1000 chars
	e.Extract([]byte(`{"model":"m","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"one"}]}`), 256, 64, &a)
	e.Extract([]byte(`{"model":"m","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"two"}]}`), 256, 64, &b)
	e.Extract([]byte(`{"model":"m","cache_salt":"tenant-2","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"one"}]}`), 256, 64, &c)
	e.Extract([]byte(`{"model":"other","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"one"}]}`), 256, 64, &d)
	if a.NBlocks < 4 || a.Blocks[0] != b.Blocks[0] || a.Blocks[3] != b.Blocks[3] {
		t.Fatalf("a shared system prompt must give shared leading blocks: %d blocks", a.NBlocks)
	}
	if c.Blocks[0] == a.Blocks[0] {
		t.Fatal("cache_salt must change the block hashes (vLLM isolates salted prefixes)")
	}
	if d.Blocks[0] == a.Blocks[0] {
		t.Fatal("another model must not share prefix blocks")
	}
}

func TestExtractBoundsPrefixLength(t *testing.T) {
	var e extractor
	var info RequestInfo
	e.Extract([]byte(`{"prompt":"`+strings.Repeat("x", 1<<20)+`"}`), 256, 64, &info)
	if info.NBlocks != 64 {
		t.Fatalf("NBlocks = %d, want max_blocks 64", info.NBlocks)
	}
	e.Extract([]byte(`{"prompt":"`+strings.Repeat("x", 1<<20)+`"}`), 16, 100000, &info)
	if info.NBlocks != maxPrefixBlocks {
		t.Fatalf("NBlocks = %d, want the cap %d", info.NBlocks, maxPrefixBlocks)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"hello","stream":true}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"cache_salt":"s"}`))
	f.Add([]byte(`{"prompt":[[1,2,3],[4,5]]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"messages":[null,1,"x",{"content":null}]}`))
	var e extractor
	f.Fuzz(func(t *testing.T, body []byte) {
		var info RequestInfo
		e.Extract(body, 8, 16, &info)
		if info.NBlocks < 0 || info.NBlocks > 16 {
			t.Fatalf("NBlocks %d out of range", info.NBlocks)
		}
		if !info.JSON && (info.NBlocks != 0 || len(info.Model) != 0 || info.Stream) {
			t.Fatal("a non-JSON body must yield no routing fields")
		}
	})
}

func TestPrefixTable(t *testing.T) {
	tb := newPrefixTable(1000)
	if len(tb.slots) != 1024 {
		t.Fatalf("slots = %d, want 1024", len(tb.slots))
	}
	blocks := []uint64{11, 22, 33, 44}
	if tb.Match(blocks) != 0 {
		t.Fatal("empty table matched")
	}
	tb.Insert(blocks[:2])
	if got := tb.Match(blocks); got != 2 {
		t.Fatalf("Match = %d, want 2", got)
	}
	tb.Insert([]uint64{22 + 1024}) // same slot as 22: evicts it
	if got := tb.Match(blocks); got != 1 {
		t.Fatalf("after eviction Match = %d, want 1", got)
	}
}

func BenchmarkExtract(b *testing.B) {
	body := []byte(`{"model":"meta-llama/Llama-3.1-8B-Instruct","stream":true,"max_tokens":128,"messages":[{"role":"system","content":"` +
		strings.Repeat("You are a helpful assistant. ", 80) + `"},{"role":"user","content":"What is the capital of France?"}]}`)
	var e extractor
	var info RequestInfo
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		e.Extract(body, 256, 64, &info)
	}
}
