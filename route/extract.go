package route

import (
	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fastjson"
)

// maxPrefixBlocks caps route.prefix.max_blocks so that RequestInfo can hold
// the block hashes in a fixed array (no allocation per request).
const maxPrefixBlocks = 256

// RequestInfo is what the router needs to know about a request body. It is
// filled by Extract from a pooled parser and is only valid for the duration
// of one request.
type RequestInfo struct {
	// JSON is false when the body is not a JSON object; the request is then
	// forwarded untouched and affinity does not apply.
	JSON bool
	// Model is the requested model or LoRA adapter name (may be empty).
	Model []byte
	// ModelHash is xxhash(Model), used for LoRA affinity; 0 when Model is empty.
	ModelHash uint64
	// Stream is the request's "stream" flag.
	Stream bool
	// Blocks holds the chained hashes of the prompt prefix, one per
	// route.prefix.block_chars characters, in order; NBlocks are valid.
	Blocks  [maxPrefixBlocks]uint64
	NBlocks int
	// PromptTokens estimates the prompt's length in tokens: the number of
	// token ids of a token-id prompt, else its text (the prompt string(s),
	// or the chat messages' roles and text) at charsPerToken bytes a token,
	// rounded up. All prompts of a batch count. 0 when there is none.
	PromptTokens int
	// MaxTokens is the request's max_tokens (or max_completion_tokens),
	// 0 when absent or not a positive integer.
	MaxTokens int
	// IgnoreEOS is the request's ignore_eos flag (vLLM's extension): the
	// output is then exactly MaxTokens long.
	IgnoreEOS bool
}

// charsPerToken is the text-to-token ratio PromptTokens assumes: about 4
// bytes a token for English text and code with Llama-3-class tokenizers,
// and exactly the ratio of internal/vllmsim.
const charsPerToken = 4

// extractor holds the per-request scratch space of Extract. Reuse one per
// request through a sync.Pool; it is not safe for concurrent use.
type extractor struct {
	p    fastjson.Parser
	text []byte
}

// Extract fills info from body without unmarshalling it into Go values:
// model, stream, and the chained block hashes of the prompt prefix (the
// chat messages' role and text in order, or the prompt; cache_salt and the
// model seed the chain, because vLLM's block hashes depend on both).
// blockChars and maxBlocks come from route.prefix; maxBlocks is capped at
// maxPrefixBlocks. A body that is not a JSON object leaves info.JSON false.
func (e *extractor) Extract(body []byte, blockChars, maxBlocks int, info *RequestInfo) {
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
	if m := o.Get("model"); m != nil && m.Type() == fastjson.TypeString {
		info.Model, _ = m.StringBytes()
		if len(info.Model) > 0 {
			info.ModelHash = xxhash.Sum64(info.Model)
		}
	}
	if s := o.Get("stream"); s != nil && s.Type() == fastjson.TypeTrue {
		info.Stream = true
	}
	info.MaxTokens = positiveInt(o.Get("max_tokens"))
	if info.MaxTokens == 0 {
		info.MaxTokens = positiveInt(o.Get("max_completion_tokens"))
	}
	if s := o.Get("ignore_eos"); s != nil && s.Type() == fastjson.TypeTrue {
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
			chars += messageChars(m)
			if len(e.text) < limit {
				e.text = appendMessageText(e.text, m)
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
			info.PromptTokens = promptArrayTokens(p)
		}
	}
	if len(e.text) > limit {
		e.text = e.text[:limit]
	}
	seed := info.ModelHash
	if salt := o.Get("cache_salt"); salt != nil && salt.Type() == fastjson.TypeString {
		b, _ := salt.StringBytes()
		seed ^= xxhash.Sum64(b) * 0x9E3779B97F4A7C15
	}
	info.NBlocks = hashBlocks(e.text, blockChars, seed, info.Blocks[:maxBlocks])
}

// appendMessageText appends one chat message's role and text content
// (a string, or the text of its parts) to dst.
func appendMessageText(dst []byte, m *fastjson.Value) []byte {
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

// hashBlocks splits text into full blocks of blockChars bytes and writes the
// chained hash of each into out: h[i] = xxhash(h[i-1], block i), seeded with
// seed. A trailing partial block is not hashed (as vLLM caches full blocks
// only). It returns the number of hashes written.
func hashBlocks(text []byte, blockChars int, seed uint64, out []uint64) int {
	n := 0
	prev := seed
	var d xxhash.Digest
	var pb [8]byte
	for off := 0; off+blockChars <= len(text) && n < len(out); off += blockChars {
		d.Reset()
		for i := range pb {
			pb[i] = byte(prev >> (8 * i))
		}
		_, _ = d.Write(pb[:])
		_, _ = d.Write(text[off : off+blockChars])
		prev = d.Sum64()
		if prev == 0 {
			prev = 1 // 0 marks an empty slot in the prefix tables
		}
		out[n] = prev
		n++
	}
	return n
}

// positiveInt returns v as an int when it is a positive integer, else 0.
func positiveInt(v *fastjson.Value) int {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0
	}
	n, err := v.Int()
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// messageChars is the length of one chat message as appendMessageText
// renders it (role, separator, text, newline), without copying.
func messageChars(m *fastjson.Value) int {
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

// promptArrayTokens estimates the tokens of a non-string prompt: a list of
// token ids counts one token per id; a batch (a list of strings or of
// token-id lists) counts all of its prompts.
func promptArrayTokens(p *fastjson.Value) int {
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
