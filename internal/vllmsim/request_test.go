package vllmsim

import (
	"errors"
	"testing"
)

func TestParseAPIRequest(t *testing.T) {
	noAdapter := func(string) string { return "" }
	cases := []struct {
		name    string
		chat    bool
		body    string
		prompts []int // token counts
		bad     bool
	}{
		{"string", false, `{"prompt":"abcdefgh"}`, []int{2}, false},
		{"string rounds up", false, `{"prompt":"abcdefghi"}`, []int{3}, false},
		{"strings", false, `{"prompt":["ab","abcdefgh"]}`, []int{1, 2}, false},
		{"token ids", false, `{"prompt":[5,6,7]}`, []int{3}, false},
		{"token id lists", false, `{"prompt":[[5,6],[7]]}`, []int{2, 1}, false},
		{"no prompt", false, `{}`, nil, true},
		{"empty list", false, `{"prompt":[]}`, nil, true},
		{"number", false, `{"prompt":5}`, nil, true},
		{"mixed list", false, `{"prompt":["a",{}]}`, nil, true},
		{"bad max_tokens", false, `{"prompt":"a","max_tokens":0}`, nil, true},
		{"chat string", true, `{"messages":[{"role":"user","content":"abcd"}]}`, []int{(len("<|user|>\nabcd\n") + 3) / 4}, false},
		{"chat parts", true, `{"messages":[{"role":"user","content":[{"type":"text","text":"ab"},{"type":"image_url"},{"type":"text","text":"cd"}]}]}`, []int{(len("<|user|>\nabcd\n") + 3) / 4}, false},
		{"chat null content", true, `{"messages":[{"role":"assistant","content":null}]}`, []int{(len("<|assistant|>\n\n") + 3) / 4}, false},
		{"chat no messages", true, `{"messages":[]}`, nil, true},
		{"chat bad content", true, `{"messages":[{"role":"user","content":5}]}`, nil, true},
		{"malformed", false, `{"prompt":`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, prompts, err := parseAPIRequest([]byte(tc.body), tc.chat, 16, noAdapter)
			if tc.bad {
				if !errors.Is(err, errBadRequest) {
					t.Fatalf("err = %v, want a bad request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(prompts) != len(tc.prompts) {
				t.Fatalf("%d prompts, want %d", len(prompts), len(tc.prompts))
			}
			for i, p := range prompts {
				if p.Tokens != tc.prompts[i] {
					t.Errorf("prompt %d: %d tokens, want %d", i, p.Tokens, tc.prompts[i])
				}
			}
		})
	}
}

func TestPromptHashes(t *testing.T) {
	long := textOf("x", 100) // 100 tokens: 6 full blocks
	a := HashText(16, "", "", long)
	b := HashText(16, "", "", long[:50], long[50:])
	if a.Tokens != 100 || len(a.BlockHashes) != 6 {
		t.Fatalf("tokens %d blocks %d", a.Tokens, len(a.BlockHashes))
	}
	for i := range a.BlockHashes {
		if a.BlockHashes[i] != b.BlockHashes[i] || a.BlockHashes[i] == 0 {
			t.Fatal("hash depends on how the text is split")
		}
	}
	c := HashText(16, "", "", long[:70]+"Z"+long[71:])
	if c.BlockHashes[0] != a.BlockHashes[0] || c.BlockHashes[1] == a.BlockHashes[1] || c.BlockHashes[5] == a.BlockHashes[5] {
		t.Error("a change in block 1 must change blocks 1.. and only them (chained)")
	}
	for _, other := range []Prompt{HashText(16, "lora", "", long), HashText(16, "", "salt", long)} {
		if other.BlockHashes[0] == a.BlockHashes[0] {
			t.Error("adapter or cache_salt does not change block hashes")
		}
	}
	ids := HashTokenIDs(16, "", "", make([]int64, 40))
	if ids.Tokens != 40 || len(ids.BlockHashes) != 2 {
		t.Errorf("token ids: %d tokens %d blocks", ids.Tokens, len(ids.BlockHashes))
	}
}

func FuzzParseAPIRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello"}`, `{"prompt":[1,2,3]}`, `{"prompt":[[1],[2,3]]}`,
		`{"prompt":["a","b"]}`, `{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		`{"prompt":`, `[]`, `null`, `{"prompt":[[]]}`, `{"max_tokens":-1,"prompt":"x"}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	// Contract: never panics; success yields at least one prompt of >= 1 token with
	// one hash per full block; failure is always a bad request.
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		_, prompts, err := parseAPIRequest(body, chat, 16, func(string) string { return "" })
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if len(prompts) == 0 {
			t.Fatal("no prompt and no error")
		}
		for _, p := range prompts {
			if p.Tokens < 1 || len(p.BlockHashes) != p.Tokens/16 && len(p.BlockHashes) != (p.Tokens-1)/16 {
				t.Fatalf("prompt %d tokens with %d block hashes", p.Tokens, len(p.BlockHashes))
			}
		}
	})
}
