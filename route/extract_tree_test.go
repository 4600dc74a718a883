package route

import (
	"bytes"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fastjson"
)

// treeExtractor is the previous Extract, which parsed the whole body into
// a fastjson value tree: the reference the byte scanner is checked against.
type treeExtractor struct {
	p    fastjson.Parser
	text []byte
}

// lastOf returns the value of o's key, the last one when the key repeats
// (as the model server reads a body), or nil.
func lastOf(o *fastjson.Object, key string) *fastjson.Value {
	var last *fastjson.Value
	o.Visit(func(k []byte, v *fastjson.Value) {
		if string(k) == key {
			last = v
		}
	})
	return last
}

func (e *treeExtractor) Extract(body []byte, blockChars, maxBlocks int, info *RequestInfo) {
	*info = RequestInfo{}
	if len(body) == 0 || blockChars <= 0 {
		return
	}
	v, err := e.p.ParseBytes(body)
	if err != nil {
		return
	}
	o, err := v.Object()
	if err != nil {
		return
	}
	info.JSON = true
	if m := lastOf(o, "model"); m != nil && m.Type() == fastjson.TypeString {
		info.Model, _ = m.StringBytes()
		if len(info.Model) > 0 {
			info.ModelHash = xxhash.Sum64(info.Model)
		}
	}
	if s := lastOf(o, "stream"); s != nil && s.Type() == fastjson.TypeTrue {
		info.Stream = true
	}
	info.MaxTokens = treePositiveInt(lastOf(o, "max_tokens"))
	if info.MaxTokens == 0 {
		info.MaxTokens = treePositiveInt(lastOf(o, "max_completion_tokens"))
	}
	if s := lastOf(o, "ignore_eos"); s != nil && s.Type() == fastjson.TypeTrue {
		info.IgnoreEOS = true
	}
	if maxBlocks > maxPrefixBlocks {
		maxBlocks = maxPrefixBlocks
	}
	limit := blockChars * maxBlocks
	e.text = e.text[:0]
	if msgs := o.Get("messages"); msgs != nil && msgs.Type() == fastjson.TypeArray {
		arr, _ := msgs.Array()
		chars := 0
		for _, m := range arr {
			chars += treeMessageChars(m)
			if len(e.text) < limit {
				e.text = treeAppendMessageText(e.text, m)
			}
		}
		info.PromptTokens = (chars + charsPerToken - 1) / charsPerToken
	} else if p := o.Get("prompt"); p != nil {
		if p.Type() == fastjson.TypeString {
			b, _ := p.StringBytes()
			e.text = append(e.text, b...)
			info.PromptTokens = (len(b) + charsPerToken - 1) / charsPerToken
		} else {
			// Token ids or lists: their JSON text is a deterministic key.
			e.text = p.MarshalTo(e.text)
			info.PromptTokens = treePromptArrayTokens(p)
		}
	}
	if len(e.text) > limit {
		e.text = e.text[:limit]
	}
	seed := info.ModelHash
	if salt := lastOf(o, "cache_salt"); salt != nil && salt.Type() == fastjson.TypeString {
		b, _ := salt.StringBytes()
		seed ^= xxhash.Sum64(b) * 0x9E3779B97F4A7C15
	}
	info.NBlocks = hashBlocks(e.text, blockChars, seed, info.Blocks[:maxBlocks])
}

// treeAppendMessageText appends one chat message's role and text content
// (a string, or the text of its parts) to dst.
func treeAppendMessageText(dst []byte, m *fastjson.Value) []byte {
	if role := m.Get("role"); role != nil && role.Type() == fastjson.TypeString {
		b, _ := role.StringBytes()
		dst = append(dst, b...)
		dst = append(dst, ':')
	}
	c := m.Get("content")
	if c == nil {
		return append(dst, '\n')
	}
	switch c.Type() {
	case fastjson.TypeString:
		b, _ := c.StringBytes()
		dst = append(dst, b...)
	case fastjson.TypeArray:
		parts, _ := c.Array()
		for _, part := range parts {
			if t := part.Get("text"); t != nil && t.Type() == fastjson.TypeString {
				b, _ := t.StringBytes()
				dst = append(dst, b...)
			}
		}
	}
	return append(dst, '\n')
}

// treePositiveInt returns v as an int when it is a positive integer, else 0.
func treePositiveInt(v *fastjson.Value) int {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0
	}
	n, err := v.Int()
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// treeMessageChars is the length of one chat message as treeAppendMessageText
// renders it (role, separator, text, newline), without copying.
func treeMessageChars(m *fastjson.Value) int {
	n := 2
	if role := m.Get("role"); role != nil && role.Type() == fastjson.TypeString {
		b, _ := role.StringBytes()
		n += len(b)
	}
	c := m.Get("content")
	if c == nil {
		return n
	}
	switch c.Type() {
	case fastjson.TypeString:
		b, _ := c.StringBytes()
		n += len(b)
	case fastjson.TypeArray:
		parts, _ := c.Array()
		for _, part := range parts {
			if t := part.Get("text"); t != nil && t.Type() == fastjson.TypeString {
				b, _ := t.StringBytes()
				n += len(b)
			}
		}
	}
	return n
}

// treePromptArrayTokens estimates the tokens of a non-string prompt: a list of
// token ids counts one token per id; a batch (a list of strings or of
// token-id lists) counts all of its prompts.
func treePromptArrayTokens(p *fastjson.Value) int {
	arr, err := p.Array()
	if err != nil {
		return 0
	}
	n := 0
	for _, it := range arr {
		switch it.Type() {
		case fastjson.TypeNumber:
			n++
		case fastjson.TypeString:
			b, _ := it.StringBytes()
			n += (len(b) + charsPerToken - 1) / charsPerToken
		case fastjson.TypeArray:
			ids, _ := it.Array()
			n += len(ids)
		}
	}
	return n
}

// FuzzExtractMatchesTreeParser checks the scanning Extract against the
// full-tree parser it replaced: on every body the tree parser accepts as a
// JSON object and that has no escapes (the tree parser re-escapes token-id
// lists, the scanner copies them as sent), both find the same model,
// stream, max_tokens, ignore_eos, prompt-token estimate and prefix blocks.
// A body the scanner refuses is one the tree parser refuses too.
func FuzzExtractMatchesTreeParser(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello world, this is long enough","stream":true,"max_tokens":7,"ignore_eos":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi there"},{"type":"image_url","image_url":{"url":"x"}}]}],"cache_salt":"s"}`,
		`{"messages":[{"content":"content before role","role":"system"},{"role":"user","content":"x"}]}`,
		`{"prompt":[[1,2,3],[4,5]],"model":"m"}`,
		`{"prompt":["abcdefgh",[1,2,3]],"max_completion_tokens":3}`,
		`{"messages":[null,1,"x",{"content":null},{"role":7,"content":{"a":1}}]}`,
		`{"model":"a","model":"b","stream":false,"stream":true}`,
		` { "prompt" : [ 1 , 2 , 3 ] , "x" : [ [ ] , { } ] } `,
		`{"x":[[[[[]]]]],"model":"m","prompt":"abcdefghijklmnop"}`,
		`{"prompt":"x","messages":"not an array"}`,
		`{"prompt":1.5e3,"max_tokens":00}`,
		`not json`,
		`[1,2]`,
		`{"a":}`,
	} {
		f.Add([]byte(s))
	}
	var scan extractor
	var tree treeExtractor
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want RequestInfo
		scan.Extract(body, 8, 16, &got)
		tree.Extract(body, 8, 16, &want)
		if got.NBlocks < 0 || got.NBlocks > 16 {
			t.Fatalf("NBlocks %d out of range", got.NBlocks)
		}
		if !got.JSON && (got.NBlocks != 0 || len(got.Model) != 0 || got.Stream || got.PromptTokens != 0) {
			t.Fatal("a non-JSON body must yield no routing fields")
		}
		if want.JSON && !got.JSON {
			t.Fatalf("the scanner refused a JSON object the tree parser accepts: %q", body)
		}
		if !want.JSON || bytes.IndexByte(body, '\\') >= 0 {
			return
		}
		if string(got.Model) != string(want.Model) || got.ModelHash != want.ModelHash || got.Stream != want.Stream ||
			got.MaxTokens != want.MaxTokens || got.IgnoreEOS != want.IgnoreEOS || got.PromptTokens != want.PromptTokens ||
			got.NBlocks != want.NBlocks || got.Blocks != want.Blocks {
			t.Fatalf("body %q:\nscanner model=%q stream=%v max=%d eos=%v tokens=%d blocks=%d\ntree    model=%q stream=%v max=%d eos=%v tokens=%d blocks=%d",
				body, got.Model, got.Stream, got.MaxTokens, got.IgnoreEOS, got.PromptTokens, got.NBlocks,
				want.Model, want.Stream, want.MaxTokens, want.IgnoreEOS, want.PromptTokens, want.NBlocks)
		}
	})
}

// Adversarial bodies cost no allocation once the extractor is warm, and the
// extractor keeps no more than maxKeptScratch bytes for the next request,
// whatever the body's shape (the tree parser built and kept a value per
// JSON token: 230 bytes per body byte for a list of ids).
func TestExtractAdversarialBodiesAllocateNothing(t *testing.T) {
	for _, shape := range adversarialShapes {
		t.Run(shape, func(t *testing.T) {
			body := adversarialBody(shape, 1<<20)
			var e extractor
			var info RequestInfo
			e.Extract(body, 256, 64, &info)
			if !info.JSON || string(info.Model) != "m" {
				t.Fatalf("shape %s: json=%v model=%q", shape, info.JSON, info.Model)
			}
			// Allocations are counted process-wide: a smaller body keeps the
			// runs short, so that other goroutines' rare allocations (timers
			// of earlier tests' leftovers) cannot add up to one per run.
			small := adversarialBody(shape, 64<<10)
			if n := leastAllocsPerRun(50, func() { e.Extract(small, 256, 64, &info) }); n != 0 {
				t.Fatalf("shape %s: %.0f allocations per body", shape, n)
			}
			if c := cap(e.text) + cap(e.model); c > maxKeptScratch {
				t.Fatalf("shape %s: the extractor keeps %d bytes", shape, c)
			}
		})
	}
}
