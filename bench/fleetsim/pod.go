package fleetsim

import (
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// request is one job in flight through the simulation.
type request struct {
	job     Job
	replica int32
	pod     int32
	sent    time.Duration // when it reached its replica
	er      vllmsim.Request
	ttft    time.Duration
	wait    time.Duration // the routing decision's probe wait
	stream  bool
	work    route.WorkTicket
	// share.tokens: the prefill counted in the other replicas' States,
	// and whether it was taken back (share.go).
	sharedPrefill int64
	sharedDone    bool
	snap          []Snapshot // every pod at arrival, when Config.Record is set
}

// pod is one simulated vLLM server: the project's engine driven in virtual
// time the way vllmsim.Server drives it in wall time (step, publish the
// post-step state, wait the step's duration, hand out its tokens).
type pod struct {
	idx      int
	eng      *vllmsim.Engine
	stepping bool            // a step is in flight; its end is scheduled
	events   []vllmsim.Event // copy of the step's events (the engine reuses its slice)
	baseName string
	maxLoRA  int
	// The engine's state as of its last change (add, step), read by every
	// scrape, probe, ORCA header and oracle view: kept here, beside the
	// fields a read touches anyway, rather than behind two more pointers.
	running, waiting int
	kvUse            float64
	// histSecs, histToks: the prefill counters of the pod's earlier life
	// (Config.History), added to every report; 0 for a fresh pod.
	histSecs, histToks float64

	// Pod-side cost counters.
	probes, scrapes int64
	probeBytes      int64
	scrapeBytes     int64
	orcaBytes       int64

	// herd index: arrivals in the current window.
	window int32

	// wbuf is whatif's scratch (analysis runs only).
	wbuf []wreq
}

func newPod(idx int, cfg vllmsim.Config, slowdown float64) (*pod, error) {
	e, err := vllmsim.NewEngine(cfg)
	if err != nil {
		return nil, err
	}
	e.SetSlowdown(slowdown)
	c := e.Config()
	p := &pod{idx: idx, eng: e, baseName: c.Model, maxLoRA: c.MaxLoRAs}
	p.sync()
	return p, nil
}

// add queues r at now. It returns whether a step must be started (the
// engine was idle).
func (p *pod) add(r *request, now time.Duration) (startStep bool, err error) {
	if !p.stepping {
		p.eng.AdvanceTo(now)
	}
	if err := p.eng.AddAt(&r.er, now); err != nil {
		return false, err
	}
	p.sync()
	p.window++
	return !p.stepping, nil
}

// step runs one engine step starting now and returns its end, or false when
// the engine is idle. The step's token events are kept until finishStep.
func (p *pod) step(now time.Duration) (time.Duration, bool) {
	p.eng.AdvanceTo(now)
	res := p.eng.Step()
	p.sync()
	if res.Idle {
		p.stepping = false
		return 0, false
	}
	p.stepping = true
	p.events = append(p.events[:0], res.Events...)
	return p.eng.Now(), true
}

// sync copies the engine's state after a change (AddAt, Step: nothing
// else changes it).
func (p *pod) sync() {
	p.running, p.waiting, p.kvUse = p.eng.Running(), p.eng.Waiting(), p.eng.KVUse()
}

// load is the report the pod's /metrics would give now (probe.endpoint
// metrics: running, waiting, KV use, the base model, the prefill counters
// of vllm:request_prefill_time_seconds and
// vllm:request_prefill_kv_computed_tokens; no /load count).
func (p *pod) load(at time.Time, src probe.Source) probe.Load {
	secs, toks := p.eng.PrefillTotals()
	secs += p.histSecs
	toks += p.histToks
	return probe.Load{
		Running: p.running, Waiting: p.waiting, KVUse: p.kvUse, ServerLoad: -1,
		MaxLoRA: p.maxLoRA, BaseModel: p.baseName, At: at, Source: src,
		PrefillSeconds: secs, PrefillTokens: toks,
	}
}

// orca is the endpoint-load-metrics header vLLM sends on a non-streaming
// response: waiting requests and KV use only.
func (p *pod) orca(at time.Time) probe.Load {
	return probe.Load{Running: -1, Waiting: p.waiting, KVUse: p.kvUse, ServerLoad: -1, At: at, Source: probe.SourceORCA}
}
