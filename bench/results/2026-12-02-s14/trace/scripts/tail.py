# usage: tail.py DIR ENTRY STRATEGY: the top 1% TTFT requests of the
# ttftwhy -records files DIR/ENTRY_STRATEGY_s*.jsonl, with the pod chosen,
# the true running/waiting there and the replica's view of each pod.
import sys, json, glob
d, entry, strat = sys.argv[1:4]
recs = []
for f in glob.glob(f"{d}/{entry}_{strat}_s*.jsonl"):
    for line in open(f):
        recs.append(json.loads(line))
recs.sort(key=lambda r: -r["ttft_ms"])
top = recs[:max(1, len(recs) // 100)]
slow = sum(1 for r in top if r["pod"] == 3)
print(f"{len(recs)} requests, top {len(top)}, on slow pod {slow}")
for r in top[:25]:
    ps = r["pods"]
    def f(p): return f"{p['running']}/{p['waiting']} q{p['view_queue']:.0f} pf{p['view_prefill']:.0f} ns{p['score_ns']:.0f}/{p['view_samples']}"
    print(f"s{r['seed']:>2} t{r['at_ms']/1000:5.1f} r{r['replica']} prompt {r['prompt']:5d} pod {r['pod']} ttft {r['ttft_ms']:6.0f} | " + " | ".join(f(p) for p in ps))
