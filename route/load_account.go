package route

import (
	"bytes"
	"time"

	"github.com/probegate/probegate/probe"
)

// meanPromptAlpha is the weight of each request in the proxy's running mean
// prompt size.
const meanPromptAlpha = 0.02

// speedReportAge is how old a report may be for its waiting count to join
// the work ahead of a speed sample (beginWork).
const speedReportAge = time.Second

// loadBook is the proxy-wide part of token-aware load (route.load): the
// running mean prompt of the requests this proxy routes and the per-model
// output estimate. Safe for concurrent use, lock-free.
type loadBook struct {
	meanPrompt ewma
	outputs    outputEstimator
	// decodeNs is the running mean of every backend's decode speed
	// samples (probe.State.DecodeSample), ns per output token: it prices a
	// request's seat time at a backend that has no learned speed yet.
	decodeNs ewma
}

// decodeNsAt returns the decode time per output token to price a request's
// seat time at b with: b's learned one, else the proxy-wide mean of every
// backend's samples, else 0 (none known: the request holds no seat time).
func (l *loadBook) decodeNsAt(b *Backend) float64 {
	if ns := b.state.DecodeNs(); ns > 0 {
		return ns
	}
	return l.decodeNs.value(0)
}

// MeanPrompt returns the running mean prompt in tokens, or def before any
// request carried one.
func (l *loadBook) MeanPrompt(def float64) float64 { return l.meanPrompt.value(def) }

// workTicket is the token work one forwarded request added to its
// backend's State (AddWork), carried until it is taken back.
type workTicket struct {
	started bool      // AddWork was called and the first byte has not come
	prefill int64     // prompt tokens counted as pending prefill
	decode  int64     // expected output tokens counted as pending decode
	waited  float64   // prefill tokens ahead of it at dispatch plus its own
	sent    time.Time // dispatch time
	model   uint64    // model hash, for the output estimate
	observe bool      // count output frames for the per-model estimate
	frames  int       // SSE data frames seen (observe only)
	stream  bool      // the response streams: its bytes time the decode
	// seat is what the request adds to its backend's seat time
	// (probe.State.HoldSeat, then StartDecode at the first byte, first);
	// last is when its latest bytes came.
	seat        probe.SeatHold
	first, last time.Time
	book        *loadBook // prices the seat time at the first byte
}

// beginWork counts the request's token work against b as it is dispatched:
// its prompt minus the prefix b is believed to hold, and its expected
// output. Call it right before State.Dispatch; every ticket must reach
// endWork.
func (p *Proxy) beginWork(rt *settings, rc *reqCtx, b *Backend, now time.Time) workTicket {
	return p.memory.beginWork(&rc.info, b, rt.blockChars, rt.defaultOutput, now)
}

// beginWork is Proxy.beginWork over the router's Memory, with
// route.prefix.block_chars and route.load.default_output_tokens.
func (m *Memory) beginWork(info *RequestInfo, b *Backend, blockChars int, defaultOutput float64, now time.Time) workTicket {
	if info.PromptTokens > 0 {
		m.book.meanPrompt.observe(float64(info.PromptTokens), meanPromptAlpha)
	}
	matched := 0
	if info.NBlocks > 0 {
		matched = b.prefix.Match(info.Blocks[:info.NBlocks])
	}
	w := workTicket{sent: now, model: info.ModelHash, book: &m.book}
	if info.PromptTokens > 0 {
		w.prefill = int64(OwnPrefill(info.PromptTokens, matched, blockChars))
	}
	w.decode = int64(m.book.outputs.expected(info.ModelHash, info.MaxTokens, info.IgnoreEOS, defaultOutput))
	w.observe = !info.IgnoreEOS && info.Stream
	w.stream = info.Stream
	if info.Stream {
		// Only a stream's first byte marks the end of prefill: a whole
		// response arrives after the decode too, no speed sample.
		pending, _, _ := b.state.Work()
		// The speed sample divides the wait by the work ahead; this
		// proxy knows only its own, so a recent report's waiting
		// requests (every client's) count at the mean prompt, as
		// LoadModel counts them: the larger of the two.
		if l := b.state.Latest(); l != nil && l.Waiting > 0 && now.Sub(l.At) < speedReportAge {
			pending = max(pending, float64(l.Waiting)*m.book.MeanPrompt(float64(w.prefill)))
		}
		w.waited = pending + float64(w.prefill)
	}
	b.state.AddWork(w.prefill, w.decode)
	w.seat = b.state.HoldSeat(w.decode, m.book.decodeNsAt(b))
	w.started = true
	return w
}

// sawBytes is called with each chunk of the response body: the first one
// ends the request's prefill and starts its decode's seat time; with
// observe, SSE data frames are counted.
func (w *workTicket) sawBytes(b *Backend, chunk []byte, now time.Time) {
	if w.started {
		b.state.PrefillDone(w.prefill, now.Sub(w.sent), w.waited)
		w.started, w.prefill, w.waited = false, 0, 0
		w.seat = b.state.StartDecode(w.seat, w.decode, w.book.decodeNsAt(b), now)
		w.first = now
	}
	w.last = now
	if w.observe {
		w.frames += bytes.Count(chunk, dataPrefix)
	}
}

var dataPrefix = []byte("data:")

// endWork takes back what beginWork counted and, for a streamed request
// without ignore_eos that completed, feeds its output length (data frames
// less the [DONE] and usage frames, approximately) to the per-model
// estimate.
func (p *Proxy) endWork(b *Backend, w *workTicket, complete bool) { p.memory.endWork(b, w, complete) }

func (m *Memory) endWork(b *Backend, w *workTicket, complete bool) {
	if w.sent.IsZero() {
		return // no work was counted
	}
	b.state.DoneWork(w.prefill, w.decode, !w.started)
	b.state.EndDecode(w.seat)
	if !w.started && complete && w.stream {
		// A completed stream times the decode: its expected tokens when
		// they are fixed (ignore_eos), else the data frames counted.
		produced := int(w.decode)
		if w.observe {
			produced = w.frames - 1
		}
		if ns := b.state.DecodeSample(w.first, produced, w.last); ns > 0 {
			m.book.decodeNs.observe(ns, probe.DecodeAlpha)
		}
	}
	if w.observe && complete && w.frames > 1 {
		m.book.outputs.observe(w.model, w.frames-1)
	}
	*w = workTicket{}
}

// loadInput returns the request-wide part of LoadModel's input for one
// decision at now over views under the load model lm: the router's mean
// prompt (this request's prompt, or one token, before there is one), the
// candidates' reference speed and the instant. The caller sets Own per
// candidate.
func loadInput(m *Memory, lm *LoadModel, info *RequestInfo, views []probe.View, now time.Time) LoadInput {
	return LoadInput{MeanPrompt: m.book.MeanPrompt(float64(max(info.PromptTokens, 1))), RefNs: lm.RefNs(views), NowUs: now.UnixMicro()}
}

// briefLoadInput is loadInput over briefs.
func briefLoadInput(m *Memory, lm *LoadModel, info *RequestInfo, briefs []probe.Brief, now time.Time) LoadInput {
	return LoadInput{MeanPrompt: m.book.MeanPrompt(float64(max(info.PromptTokens, 1))), RefNs: lm.briefRefNs(briefs), NowUs: now.UnixMicro()}
}
