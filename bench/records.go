package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// PodSnap is one pod's state when a request arrived at its pod, for
// ArrivalRecord: the pod's true counts and what the request's proxy
// replica believed of it. The field names match fleetsim's Snapshot, so
// that live and simulated runs of one seed compare line by line.
type PodSnap struct {
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// ViewQueue, ViewPrefill, ViewNs, ViewPodNs, ViewSamples, ViewSeeded
	// and ViewForeign are the replica's Brief of the pod (probe.Brief:
	// queue, pending prefill tokens, learned and pod-reported ns per
	// prefill token, own speed samples, seeded pod speed, foreign share).
	ViewQueue   float64 `json:"view_queue"`
	ViewPrefill float64 `json:"view_prefill"`
	ViewNs      float64 `json:"view_ns"`
	ViewPodNs   float64 `json:"view_pod_ns"`
	ViewSamples int     `json:"view_samples"`
	ViewSeeded  bool    `json:"view_seeded"`
	ViewForeign float64 `json:"view_foreign"`
	// ScoreNs is the ns per token the replica's route.load scores the pod
	// with (route.LoadModel.BriefNs of the fields above).
	ScoreNs float64 `json:"score_ns"`
}

// ArrivalRecord is one request of a run as its pod received it (Setup.
// Records): which replica sent it where, and every pod's PodSnap then.
// The live snapshot is taken just after the pick (the request's own
// prefill is already in its pod's ViewPrefill and counts); fleetsim's
// (ttftwhy -records) just before.
type ArrivalRecord struct {
	Src      string    `json:"src"`
	Strategy string    `json:"strategy"`
	Seed     int64     `json:"seed"`
	Index    int       `json:"i"`
	AtMs     float64   `json:"at_ms"`
	Prompt   int       `json:"prompt"`
	Out      int       `json:"out"`
	Replica  int       `json:"replica"`
	Pod      int       `json:"pod"`
	TTFTMs   float64   `json:"ttft_ms"`
	Pods     []PodSnap `json:"pods"`
}

// recordIDPrefix starts the X-Request-Id the bench sends with request i
// when it records arrivals: recordIDPrefix + i.
const recordIDPrefix = "rec-"

// arrivals collects a run's ArrivalRecords: servers' SetOnArrival hook
// calls arrive on the request's handler goroutine.
type arrivals struct {
	mu      sync.Mutex
	start   time.Time
	reqs    []Req
	proxies []*ProxyInstance
	load    route.LoadModel
	// podOf maps a proxy's backend position to the fleet's server index
	// (the pool orders backends by address).
	podOf [][]int
	recs  map[int]*ArrivalRecord
}

// hook returns server pod's SetOnArrival callback.
func (a *arrivals) hook(servers []*vllmsim.Server, pod int) func(string) {
	return func(id string) {
		// The proxy suffixes a client's id (route's appendUpstreamID):
		// rec-<i>-<16 hex digits>, then -r<n> on a retry.
		n, _, _ := strings.Cut(strings.TrimPrefix(id, recordIDPrefix), "-")
		i, err := strconv.Atoi(n)
		if err != nil || !strings.HasPrefix(id, recordIDPrefix) || i < 0 || i >= len(a.reqs) {
			return
		}
		r := &a.reqs[i]
		rep := r.Replica % max(len(a.proxies), 1)
		rec := &ArrivalRecord{Src: "live", Index: i, AtMs: ms(time.Since(a.start)), Prompt: r.PromptTokens, Out: r.MaxTokens,
			Replica: rep, Pod: pod, Pods: make([]PodSnap, len(servers))}
		for j, s := range servers {
			st := s.State()
			rec.Pods[j].Running, rec.Pods[j].Waiting = st.Running, st.Waiting
		}
		if len(a.proxies) > 0 {
			now := time.Now()
			bs := a.proxies[rep].P.Pool().Backends()
			for k, b := range bs {
				if k >= len(a.podOf[rep]) {
					break
				}
				var br probe.Brief
				b.State().BriefInto(&br, now.Add(-2*time.Second))
				ps := &rec.Pods[a.podOf[rep][k]]
				ps.ViewQueue, ps.ViewPrefill, ps.ViewNs, ps.ViewPodNs = br.Queue, br.PrefillTokens, br.NsPerToken, br.PodNsPerToken
				ps.ViewSamples, ps.ViewSeeded, ps.ViewForeign = br.SpeedSamples, br.PodSeeded, br.ForeignShare
				ps.ScoreNs = a.load.BriefNs(&br)
			}
		}
		a.mu.Lock()
		a.recs[i] = rec
		a.mu.Unlock()
	}
}

// finish fills in each record's TTFT from the outcomes and returns the
// records in request order (requests that never reached a pod have none).
func (a *arrivals) finish(outs []Outcome) []ArrivalRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ArrivalRecord
	for i := range a.reqs {
		rec, ok := a.recs[i]
		if !ok {
			continue
		}
		if i < len(outs) && outs[i].OK() {
			rec.TTFTMs = ms(outs[i].TTFT)
		} else {
			rec.TTFTMs = -1
		}
		out = append(out, *rec)
	}
	return out
}

// WriteRecords writes recs as JSON lines to dir/name.jsonl.
func WriteRecords(dir, name string, recs []ArrivalRecord) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RecordsName is the file name (without .jsonl) of one run's records.
func RecordsName(variant, strategy string, seed int64) string {
	return fmt.Sprintf("%s_%s_s%d", variant, strategy, seed)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// newArrivals returns the collector of a run of strategy: reqs copied with
// their IDs set, and each proxy's backend order mapped to the fleet's
// server order (addrs).
func newArrivals(strategy string, reqs []Req, proxies []*ProxyInstance, urls, addrs []string) *arrivals {
	a := &arrivals{start: time.Now(), proxies: proxies, recs: make(map[int]*ArrivalRecord, len(reqs))}
	a.reqs = make([]Req, len(reqs))
	copy(a.reqs, reqs)
	for i := range a.reqs {
		a.reqs[i].ID = recordIDPrefix + strconv.Itoa(i)
	}
	if cfg, err := StrategyConfig(strategy, urls); err == nil {
		a.load = route.PickerConfigFrom(cfg).Load
	}
	idx := map[string]int{}
	for i, ad := range addrs {
		idx[ad] = i
	}
	for _, p := range proxies {
		var m []int
		for _, b := range p.P.Pool().Backends() {
			m = append(m, idx[b.State().Addr()])
		}
		a.podOf = append(a.podOf, m)
	}
	return a
}
