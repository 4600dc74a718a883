package route

import "github.com/cespare/xxhash/v2"

// maxPrefixBlocks caps route.prefix.max_blocks so that RequestInfo can hold
// the block hashes in a fixed array (no allocation per request).
const maxPrefixBlocks = 256

// RequestInfo is what the router needs to know about a request body. It is
// filled by Extract and is only valid for the duration of one request (Model
// may point into the body).
type RequestInfo struct {
	// JSON is false when the body is not a JSON object; the request is then
	// forwarded untouched and affinity does not apply.
	JSON bool
	// Model is the requested model or LoRA adapter name (may be empty).
	Model []byte
	// ModelHash is xxhash(Model), used for LoRA affinity; 0 when Model is empty.
	ModelHash uint64
	// Stream is the request's "stream" flag, where the model server reads
	// one: the handler clears it for a path that never streams
	// (streamsAt).
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
// request through a sync.Pool; it is not safe for concurrent use. What it
// keeps between requests is bounded by maxKeptScratch.
type extractor struct {
	text  []byte // the prompt prefix, at most route.prefix block_chars x max_blocks
	model []byte // an unescaped model name, when it had escapes
}

// maxKeptScratch bounds the scratch an extractor keeps for the next request.
const maxKeptScratch = 64 << 10

// maxModelLen bounds the model name Extract unescapes; a longer name with
// escapes is used raw (no model server serves such a name anyway).
const maxModelLen = 1 << 10

// Extract fills info from body in one pass over its bytes, building no
// value tree: model, stream, max_tokens, ignore_eos, the prompt-token
// estimate, and the chained block hashes of the prompt prefix (the chat
// messages' role and text in order, or the prompt; cache_salt and the model
// seed the chain, because vLLM's block hashes depend on both). blockChars
// and maxBlocks come from route.prefix; maxBlocks is capped at
// maxPrefixBlocks. A body that is not a JSON object leaves info.JSON false.
//
// Cost: the top-level object is scanned once; the messages or prompt value
// is walked at most twice more (once to count, once to copy text, the copy
// stopping at blockChars x maxBlocks bytes). Nesting is skipped with a
// counter, never recursion. It allocates nothing once its scratch is warm,
// and keeps at most maxKeptScratch bytes. Values inside unknown fields are
// checked for balance, not fully validated: a body the model server will
// refuse anyway may still yield routing fields.
func (e *extractor) Extract(body []byte, blockChars, maxBlocks int, info *RequestInfo) {
	*info = RequestInfo{}
	if cap(e.text) > maxKeptScratch {
		e.text = nil
	}
	if cap(e.model) > maxKeptScratch {
		e.model = nil
	}
	if len(body) == 0 || blockChars <= 0 {
		return
	}
	if maxBlocks > maxPrefixBlocks {
		maxBlocks = maxPrefixBlocks
	}
	limit := blockChars * maxBlocks
	e.text = e.text[:0]
	var f topFields
	if !e.scanTop(body, limit, &f) {
		e.text = e.text[:0]
		return
	}
	info.JSON = true
	info.PromptTokens = f.promptTokens
	if f.model.ok() && body[f.model.start] == '"' {
		info.Model = e.unescapeModel(body[f.model.start+1 : f.model.end-1])
		if len(info.Model) > 0 {
			info.ModelHash = xxhash.Sum64(info.Model)
		}
	}
	info.Stream = f.stream.ok() && string(body[f.stream.start:f.stream.end]) == "true"
	info.IgnoreEOS = f.ignoreEOS.ok() && string(body[f.ignoreEOS.start:f.ignoreEOS.end]) == "true"
	info.MaxTokens = positiveInt(body, f.maxTokens)
	if info.MaxTokens == 0 {
		info.MaxTokens = positiveInt(body, f.maxCompletionTokens)
	}
	if len(e.text) > limit {
		e.text = e.text[:limit]
	}
	seed := info.ModelHash
	if f.cacheSalt.ok() && body[f.cacheSalt.start] == '"' {
		seed ^= xxhash.Sum64(body[f.cacheSalt.start+1:f.cacheSalt.end-1]) * 0x9E3779B97F4A7C15
	}
	info.NBlocks = hashBlocks(e.text, blockChars, seed, info.Blocks[:maxBlocks])
}

// unescapeModel returns the model name of a raw JSON string body: the body
// itself when it has no escapes, else its unescaped copy in e.model.
func (e *extractor) unescapeModel(raw []byte) []byte {
	if indexByte(raw, '\\') < 0 || len(raw) > maxModelLen {
		return raw
	}
	e.model, _ = appendUnescaped(e.model[:0], raw, maxModelLen)
	return e.model
}

// span is a value's bytes in the body, [start, end); end == 0 when absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// topFields are the spans of the top-level scalar fields Extract reads, and
// what scanTop learnt of the prompt. Of a repeated scalar key the last
// occurrence counts, as the model server reads the body: Python's json module (vLLM's
// FastAPI) and Go's encoding/json both keep the last. Taking the first let
// a client send {"stream":true,...,"stream":false}: a non-stream answer
// the proxy judged a stream, whose first-byte timeout always counts
// against the backend (firstByteTimeoutOutcome), so a client's long
// generations opened a working pod's breaker. The prompt's text, a routing
// estimate only, is still read from the first messages array (or else
// the first prompt), while the scan passes over it.
type topFields struct {
	model, stream, maxTokens, maxCompletionTokens, ignoreEOS, cacheSalt span

	messages     bool // a messages array was read: it wins over prompt
	prompt       bool // a prompt was read
	promptTokens int
}

// scanTop scans a top-level JSON object once: it records the spans of the
// scalar fields Extract reads and, as it meets them, reads the messages
// array (or else the prompt) into e.text (up to limit bytes) and the
// prompt-token estimate. It reports false when body is not a JSON object.
func (e *extractor) scanTop(body []byte, limit int, f *topFields) bool {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipWS(body, i+1) == len(body)
	}
	var kb [maxKeyRaw]byte
	for {
		if i >= len(body) || body[i] != '"' {
			return false
		}
		ke, ok := skipString(body, i)
		if !ok {
			return false
		}
		key := keyName(body[i+1:ke-1], kb[:0])
		i = skipWS(body, ke)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipWS(body, i+1)
		if i >= len(body) {
			return false
		}
		ve := -1
		var dst *span
		switch string(key) {
		case "model":
			dst = &f.model
		case "stream":
			dst = &f.stream
		case "max_tokens":
			dst = &f.maxTokens
		case "max_completion_tokens":
			dst = &f.maxCompletionTokens
		case "ignore_eos":
			dst = &f.ignoreEOS
		case "cache_salt":
			dst = &f.cacheSalt
		case "messages":
			if !f.messages && body[i] == '[' {
				f.messages = true
				var chars int
				e.text, chars, ve = appendMessages(e.text[:0], body[i:], limit)
				if ve < 0 {
					return false
				}
				ve += i
				f.promptTokens = (chars + charsPerToken - 1) / charsPerToken
			}
		case "prompt":
			if !f.prompt && !f.messages {
				f.prompt = true
				if ve = e.readPrompt(body[i:], limit, f); ve < 0 {
					return false
				}
				ve += i
			}
		}
		if ve < 0 {
			if ve, ok = skipValue(body, i); !ok {
				return false
			}
		}
		if dst != nil {
			*dst = span{i, ve}
		}
		i = skipWS(body, ve)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = skipWS(body, i+1)
		case '}':
			return skipWS(body, i+1) == len(body)
		default:
			return false
		}
	}
}

// readPrompt reads the prompt value that starts at b[0] (a string, or
// token ids and batches) into e.text and the prompt-token estimate, and
// returns the index just past it (-1 if malformed).
func (e *extractor) readPrompt(b []byte, limit int, f *topFields) int {
	switch b[0] {
	case '"':
		end, ok := skipString(b, 0)
		if !ok {
			return -1
		}
		var n int
		e.text, n = appendUnescaped(e.text[:0], b[1:end-1], limit)
		f.promptTokens = (n + charsPerToken - 1) / charsPerToken
		return end
	case '[':
		var end int
		f.promptTokens, end = promptArrayTokens(b)
		if end < 0 {
			return -1
		}
		// Token ids or lists: their compact JSON text is a deterministic
		// key.
		e.text = appendCompact(e.text[:0], b[:end], limit)
		return end
	}
	end, ok := skipValue(b, 0)
	if !ok {
		return -1
	}
	return end
}

// maxKeyRaw is the longest raw key (between its quotes) that can name a
// field Extract reads: its longest name with every character escaped
// (\u0073 for s). A shorter bound let a key spelled with more escapes
// pass unread, as another key, though the model server reads it as the
// field: {"stream":true,"\u0073\u0074\u0072\u0065\u0061\u006d":false}
// made a non-stream request a stream for the proxy (see topFields).
const maxKeyRaw = 6 * len("max_completion_tokens")

// keyName returns a raw key (between its quotes), unescaped into buf when
// it has escapes and fits; a longer escaped key (over maxKeyRaw) cannot
// name a field Extract reads, and matches none.
func keyName(raw, buf []byte) []byte {
	if indexByte(raw, '\\') < 0 {
		return raw
	}
	if len(raw) > cap(buf) {
		return nil
	}
	out, _ := appendUnescaped(buf, raw, cap(buf))
	return out
}

// maxTokensCap bounds the max_tokens (max_completion_tokens) Extract
// reports: above any model's context, which bounds what a model server
// generates (vLLM caps a request's output at its context or refuses it),
// and low enough that the expected output of any number of requests in
// flight sums without overflow (probe.State counts it in an int64). Read
// as given, ten requests in flight asking for 999999999999999999 tokens
// with ignore_eos wrapped their backend's pending decode count negative,
// which reads as none: the backend looked idle to a load model weighing
// decode (route.load.decode_weight).
const maxTokensCap = 1 << 24

// positiveInt returns the value at s when it is a positive integer, at
// most maxTokensCap (a larger one, of any length, reads as the cap), else
// 0.
func positiveInt(body []byte, s span) int {
	if !s.ok() {
		return 0
	}
	n := 0
	for _, c := range body[s.start:s.end] {
		if c < '0' || c > '9' {
			return 0
		}
		if n < maxTokensCap {
			n = n*10 + int(c-'0')
		}
	}
	return min(n, maxTokensCap)
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

// streamsAt reports whether vLLM answers a request to path (as forwarded)
// with a stream when its body says "stream": true: its generation
// endpoints. The others (embeddings, pooling, classify, score, rerank,
// tokenize, detokenize) read no such field and answer whole, their head
// coming only once their work is done, whose size the client chooses; a
// flag the proxy believed there made their first-byte timeout count as a
// stream's, always against the backend (firstByteTimeoutOutcome), so that a
// client's long requests with "stream": true opened a working pod's
// breaker. A path not listed (a custom route.allow_paths) is judged a
// non-stream answer's way, the lenient one.
func streamsAt(path []byte) bool {
	switch string(path) {
	case "/v1/completions", "/v1/chat/completions", "/v1/responses",
		"/v1/audio/transcriptions", "/v1/audio/translations":
		return true
	}
	return false
}
