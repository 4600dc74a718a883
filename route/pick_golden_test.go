package route

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// updateGolden rewrites testdata/probe_decisions.golden from the current
// code: only after a deliberate change of the probe policy's decisions.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/probe_decisions.golden")

const goldenFile = "testdata/probe_decisions.golden"

// goldenProber answers the probes of a Run with seeded loads, so that the
// pick after a probe is exercised; its answers come from its own random
// source, never from the picker's.
type goldenProber struct {
	r   *rand.Rand
	now func() time.Time
}

func (g *goldenProber) Run(_ context.Context, cands, spares []*probe.State) probe.Result {
	for _, s := range cands {
		if g.r.IntN(4) == 0 {
			continue // no answer: the pick decides on what it had
		}
		l := probe.Load{Running: g.r.IntN(6), Waiting: g.r.IntN(3), KVUse: g.r.Float64(), ServerLoad: -1, At: g.now(), Source: probe.SourceProbe}
		s.Report(&l)
	}
	used := 0
	if len(spares) > 0 && g.r.IntN(3) == 0 {
		used = 1
		l := probe.Load{Running: g.r.IntN(6), Waiting: 0, KVUse: -1, ServerLoad: -1, At: g.now(), Source: probe.SourceProbe}
		spares[0].Report(&l)
	}
	return probe.Result{SparesUsed: used}
}

// goldenDecisions runs the probe policy over a fixed, seeded set of
// fleets, views and requests and returns its decisions, one line per
// scenario: pool sizes 1 to 200, both route.load modes, d 1 to 3, with
// and without a prober and hedges; reports fresh, stale, partial (ORCA's
// KV-only and waiting-only), none; token work and learned speeds; prompts
// sharing one of a few prefixes at several depths or none, LoRA adapters
// and base-model requests; exclusions and draining backends. Each pick is
// dispatched (counters, token work, prefix memory), so state evolves as
// in a proxy. views, when non-nil, replaces the state reader (Deps.Views).
func goldenDecisions(t testing.TB, views func() ViewSource) []string {
	sizes := []int{1, 2, 3, 4, 7, 8, 16, 17, 33, 64, 200}
	var out []string
	for sc := range 132 {
		r := rand.New(rand.NewPCG(uint64(sc), 0x901d))
		n := sizes[sc%len(sizes)]
		mode := config.LoadRequests
		if sc/len(sizes)%2 == 1 {
			mode = config.LoadTokens
		}
		now := pickT0
		clock := func() time.Time { return now }
		pool, bs := testPool(n)
		for i, b := range bs {
			switch r.IntN(6) {
			case 0: // never reported
			case 1: // vLLM's ORCA header: waiting and KV use only
				l := probe.Load{Running: -1, Waiting: r.IntN(4), KVUse: r.Float64(), ServerLoad: -1, At: now.Add(-time.Duration(r.IntN(3000)) * time.Millisecond), Source: probe.SourceORCA}
				b.state.Report(&l)
			default:
				l := probe.Load{Running: r.IntN(8), Waiting: r.IntN(4), KVUse: r.Float64(), ServerLoad: -1, At: now.Add(-time.Duration(r.IntN(3000)) * time.Millisecond), Source: probe.SourceScrape}
				if r.IntN(3) == 0 {
					l.BaseModel = "base"
					l.MaxLoRA = 2
					if r.IntN(2) == 0 {
						l.RunningLoRAs = []string{fmt.Sprintf("lora-%d", r.IntN(3))}
					}
				}
				if r.IntN(5) == 0 {
					l.KVUse = -1
				}
				b.state.Report(&l)
			}
			for range r.IntN(4) {
				b.state.Dispatch()
			}
			if r.IntN(3) == 0 {
				b.state.AddWork(int64(r.IntN(4000)), int64(r.IntN(200)))
				if r.IntN(2) == 0 {
					b.state.PrefillDone(int64(r.IntN(2000)), time.Duration(1+r.IntN(400))*time.Millisecond, float64(300+r.IntN(3000)))
				}
			}
			if i > 0 && r.IntN(10) == 0 {
				b.draining.Store(true)
			}
		}
		pc := testPickerConfig(config.PolicyProbe)
		pc.Load.Tokens = mode == config.LoadTokens
		pc.D = 1 + sc%3
		pc.Hedges = sc % 2
		deps := Deps{Memory: &Memory{}, Rand: seeded(uint64(sc) + 1), Now: clock}
		if sc%4 != 3 {
			deps.Prober = &goldenProber{r: rand.New(rand.NewPCG(uint64(sc), 7)), now: clock}
		}
		if views != nil {
			deps.Views = views()
		}
		pk := mustPicker(t, pc, pool, deps)
		s := NewScratch()
		var line strings.Builder
		fmt.Fprintf(&line, "%d n=%d %s d=%d hedges=%d prober=%t:", sc, n, mode, pc.D, pc.Hedges, deps.Prober != nil)
		for range 40 {
			now = now.Add(time.Duration(r.IntN(60)) * time.Millisecond)
			info := goldenRequest(r)
			var excl []*Backend
			if r.IntN(5) == 0 {
				excl = append(excl, bs[r.IntN(n)])
			}
			b, dec, err := pk.Pick(context.Background(), info, excl, s)
			if err != nil {
				fmt.Fprintf(&line, " err")
				continue
			}
			i := 0
			for bs[i] != b {
				i++
			}
			fmt.Fprintf(&line, " %d/%d", i, dec.Source)
			b.state.Dispatch()
			b.state.AddWork(int64(info.PromptTokens), int64(info.MaxTokens))
			deps.Memory.NoteDispatch(b, info, now)
			if r.IntN(3) == 0 {
				f := bs[r.IntN(n)]
				if f.state.Inflight() > 0 {
					f.state.Finish()
				}
			}
		}
		out = append(out, line.String())
	}
	return out
}

// goldenRequest returns a seeded request: a prompt sharing one of four
// prefixes to a random depth then unique blocks, or a unique prompt, or
// none; for the base model, a LoRA adapter, or no model.
func goldenRequest(r *rand.Rand) *RequestInfo {
	info := &RequestInfo{JSON: true, MaxTokens: 16 + r.IntN(64), IgnoreEOS: r.IntN(2) == 0}
	switch r.IntN(4) {
	case 0:
	case 1:
		info.NBlocks = 1 + r.IntN(maxPrefixBlocks)
		u := r.Uint64()
		for i := range info.NBlocks {
			info.Blocks[i] = u + uint64(i)
		}
	default:
		fam := uint64(r.IntN(4)+1) << 40
		shared := 1 + r.IntN(12)
		info.NBlocks = min(shared+r.IntN(8), maxPrefixBlocks)
		u := r.Uint64()
		for i := range info.NBlocks {
			if i < shared {
				info.Blocks[i] = fam + uint64(i)
			} else {
				info.Blocks[i] = u + uint64(i)
			}
		}
	}
	info.PromptTokens = info.NBlocks*64 + r.IntN(64)
	switch r.IntN(4) {
	case 0:
	case 1:
		info.Model = []byte("base")
	default:
		info.Model = []byte(fmt.Sprintf("lora-%d", r.IntN(3)))
	}
	if len(info.Model) > 0 {
		info.ModelHash = uint64(len(info.Model))*0x9E3779B97F4A7C15 + uint64(info.Model[len(info.Model)-1])
	}
	return info
}

// The probe policy's decisions on a fixed, seeded set of fleets, views and
// requests are those recorded in testdata/probe_decisions.golden: a change
// that is meant to make picks cheaper (fewer reads, cached values) must not
// change a single pick. Regenerate the file with -update-golden only after
// a deliberate change of the policy.
func TestProbeDecisionsGolden(t *testing.T) {
	got := goldenDecisions(t, nil)
	if *updateGolden {
		if err := os.WriteFile(goldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d scenarios, the golden file has %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("scenario decisions differ:\n got %s\nwant %s", got[i], want[i])
		}
	}
	// Through a ViewSource other than StateViews (as the benchmark's
	// oracle installs), which the picker reads view by view: the same.
	generic := goldenDecisions(t, func() ViewSource { return stateViewsWrapper{} })
	for i := range generic {
		if generic[i] != want[i] {
			t.Errorf("scenario decisions through a ViewSource differ:\n got %s\nwant %s", generic[i], want[i])
		}
	}
}

// stateViewsWrapper reads the backends' states as StateViews does, but is
// another type: the pickers take their generic path.
type stateViewsWrapper struct{}

func (stateViewsWrapper) View(b *Backend, now time.Time, staleAfter time.Duration) probe.View {
	return b.state.View(now, staleAfter)
}
