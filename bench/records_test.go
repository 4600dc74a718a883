package bench

import (
	"context"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// TestRecordsSayWhereEachRequestWent runs 40 trace rows through 2 probe
// replicas in front of 3 servers, the last one 2x slow, with Records on,
// and checks that every request has a record naming the replica that sent
// it and the server that served it (per-server counts equal the servers'
// own), and that the replica's view was read: by the last requests each
// replica has timed first bytes of some pod (a learned speed and a score
// speed) and counts its own pending work.
func TestRecordsSayWhereEachRequestWent(t *testing.T) {
	rows, err := LoadTrace("")
	if err != nil {
		t.Fatal(err)
	}
	win := TraceWindow(rows, 0, 0, 75)[:40]
	reqs := TraceRequests(win, vllmsim.DefaultConfig().Model, 2, 1)
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.01
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	su := Setup{Servers: 3, Sim: sim, Replicas: 2, Faults: map[int]vllmsim.Faults{2: {Slowdown: 2}}, Records: true}
	rr, err := RunOne(ctx, su, Probe, reqs, 20*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Records) != len(reqs) {
		t.Fatalf("%d records for %d requests", len(rr.Records), len(reqs))
	}
	perPod := make([]int64, su.Servers)
	learned, pending := 0, 0
	for i, rec := range rr.Records {
		if rec.Index != i || rec.Replica != reqs[i].Replica%2 || rec.Prompt != reqs[i].PromptTokens {
			t.Fatalf("record %d: %+v, request replica %d prompt %d", i, rec, reqs[i].Replica, reqs[i].PromptTokens)
		}
		if rec.TTFTMs <= 0 || len(rec.Pods) != su.Servers {
			t.Fatalf("record %d: TTFT %v, %d pods", i, rec.TTFTMs, len(rec.Pods))
		}
		perPod[rec.Pod]++
		if rec.Pods[rec.Pod].Running+rec.Pods[rec.Pod].Waiting == 0 {
			t.Errorf("record %d: its pod %d shows no request at its own arrival", i, rec.Pod)
		}
		if rec.Pods[rec.Pod].ViewPrefill > 0 {
			pending++
		}
		for _, p := range rec.Pods {
			if p.ViewNs > 0 && p.ScoreNs > 0 {
				learned++
				break
			}
		}
	}
	for i, n := range perPod {
		if n != rr.PerServer[i] {
			t.Errorf("records put %v requests on the servers, the servers served %v", perPod, rr.PerServer)
			break
		}
	}
	if learned == 0 || pending == 0 {
		t.Errorf("no record read the replicas' views: %d with a learned speed, %d with own pending prefill at the pod", learned, pending)
	}
}
