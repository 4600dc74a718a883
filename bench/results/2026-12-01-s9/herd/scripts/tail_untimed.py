#!/usr/bin/env python3
# usage: tail_untimed.py DIR STRATEGY  (records of trace_hetero_r8)
# The slowest 1%: how many landed on the slow (last) pod, and for how many of those the
# deciding replica had not timed that pod yet (no learned speed: route.load scores it at
# the candidates' mean speed), or had timed it at under 1.3x the others.
import sys, json, glob, gzip
d, st = sys.argv[1], sys.argv[2]
rs = []
for f in glob.glob(f'{d}/trace_hetero_r8_{st}_s*.jsonl*'):
    rs += [json.loads(l) for l in (gzip.open(f, 'rt') if f.endswith('.gz') else open(f))]
t = sorted(r['ttft_ms'] for r in rs); cut = t[int(len(t) * 0.99)]
top = [r for r in rs if r['ttft_ms'] >= cut]
last = len(rs[0]['pods']) - 1
ts = [r for r in top if r['pod'] == last]
unk = sum(1 for r in ts if r['pods'][last]['view_ns'] == 0)
def ratio(r):
    o = [p['score_ns'] for p in r['pods'][:last] if p['score_ns'] > 0]
    return r['pods'][last]['score_ns'] / (sum(o) / len(o)) if o and r['pods'][last]['score_ns'] > 0 else None
low = sum(1 for r in ts if ratio(r) is not None and ratio(r) < 1.3)
gap = sorted((r['pods'][r['pod']]['running'] + r['pods'][r['pod']]['waiting']) - r['pods'][r['pod']]['view_queue'] for r in top)
print(f"{d} {st}: top {len(top)}, on the slow pod {len(ts)}, of which untimed by the replica {unk}, timed under 1.3x {low}; true minus viewed queue at the chosen pod, top p50 {gap[len(gap)//2]}")
