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

// Prefill returns the prompt tokens the ticket counts as pending prefill
// at its backend (0 once its first byte has come).
func (t *WorkTicket) Prefill() int64 { return t.w.prefill }

// SpeedSample returns what the ticket's first byte arriving at now would
// give its backend's learned speed (probe.State.PrefillDone): the time
// since dispatch and the prefill tokens the request waited for (the work
// ahead of it at dispatch plus its own); tokens 0 when it gives none (the
// first byte already came, or the request does not stream). A simulator
// comparing what proxies could learn from each other's requests
// (fleetsim's _sharespeed) hands the same sample to other States; the
// proxy never does.
func (t *WorkTicket) SpeedSample(now time.Time) (elapsed time.Duration, tokens float64) {
	if !t.w.started || t.w.waited <= 0 {
		return 0, 0
	}
	return now.Sub(t.w.sent), t.w.waited
}

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
