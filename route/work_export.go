package route

import "time"

// WorkTicket is the token work one request added to its backend's load
// state (route.load tokens), for a simulator that forwards requests
// without a Proxy: Memory.BeginWork at dispatch, SawBytes with each chunk
// of the response (the first ends the prefill), Memory.EndWork at the end.
// The Proxy does exactly this around each attempt. Not safe for concurrent
// use; one per request.
type WorkTicket struct{ w workTicket }

// BeginWork counts info's token work against b as it is dispatched at now
// (call it right before b.State().Dispatch), with route.prefix.block_chars
// and route.load.default_output_tokens. The ticket must reach EndWork.
func (m *Memory) BeginWork(info *RequestInfo, b *Backend, blockChars int, defaultOutput float64, now time.Time) WorkTicket {
	return WorkTicket{w: m.beginWork(info, b, blockChars, defaultOutput, now)}
}

// SawBytes records a chunk of b's response arriving at now.
func (t *WorkTicket) SawBytes(b *Backend, chunk []byte, now time.Time) { t.w.sawBytes(b, chunk, now) }

// EndWork takes back what BeginWork counted; complete is whether the
// response ended normally.
func (m *Memory) EndWork(b *Backend, t *WorkTicket, complete bool) { m.endWork(b, &t.w, complete) }

// ExtractInfo fills info from a request body as the proxy does (model,
// stream, max_tokens, ignore_eos, prompt tokens and prefix block hashes),
// for a simulator that routes without a Proxy. blockChars and maxBlocks
// are route.prefix's. Unlike the proxy's pooled extractor it allocates.
func ExtractInfo(body []byte, blockChars, maxBlocks int, info *RequestInfo) {
	var e extractor
	e.Extract(body, blockChars, maxBlocks, info)
}
