#!/usr/bin/env python3
# usage: [SEEDS=1,2] recs.py DIR [DIR ...]  (files <entry>_<strategy>_s<seed>.jsonl[.gz] from bench -records or ttftwhy -records)
# Per source, strategy and seed group: p99 TTFT, share of requests on the slow (last) pod by arrival
# time, the score-ns ratio slow/others at the decisions, and what the slowest 1% looked like.
import sys, json, glob, os, math, collections, gzip
def pct(xs, p):
    xs = sorted(xs)
    if not xs: return float('nan')
    k = (len(xs) - 1) * p / 100; f = math.floor(k); c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)
groups = collections.defaultdict(list)
seeds_filter = set(int(s) for s in os.environ.get('SEEDS', '').split(',') if s)
for d in sys.argv[1:]:
    for f in glob.glob(os.path.join(d, '*.jsonl')) + glob.glob(os.path.join(d, '*.jsonl.gz')):
        for line in (gzip.open(f, 'rt') if f.endswith('.gz') else open(f)):
            r = json.loads(line)
            if seeds_filter and r['seed'] not in seeds_filter: continue
            if r['ttft_ms'] < 0: continue
            groups[(r['src'], r['strategy'])].append(r)
B = [2000, 5000, 10000, 1e12]
for (src, st), rs in sorted(groups.items()):
    n = len(rs); last = len(rs[0]['pods']) - 1
    t = [r['ttft_ms'] for r in rs]
    p99 = pct(t, 99)
    byseed = collections.defaultdict(list)
    for r in rs: byseed[r['seed']].append(r['ttft_ms'])
    seedp99 = {s: round(pct(v, 99)) for s, v in sorted(byseed.items())}
    share = []
    lo = 0
    for b in B:
        sel = [r for r in rs if lo <= r['at_ms'] < b]
        share.append(f"{100*sum(r['pod']==last for r in sel)/max(len(sel),1):.0f}%/{len(sel)}")
        lo = b
    ratios = []; known = 0
    for r in rs:
        p = r['pods']; o = [x['score_ns'] for x in p[:last] if x['score_ns'] > 0]
        if p[last]['score_ns'] > 0 and o:
            ratios.append(p[last]['score_ns'] / (sum(o) / len(o))); known += 1
    top = [r for r in rs if r['ttft_ms'] >= pct(t, 99)]
    onslow = sum(r['pod'] == last for r in top)
    q = [r['pods'][r['pod']]['running'] + r['pods'][r['pod']]['waiting'] for r in top]
    minq = [min(x['running'] + x['waiting'] for x in r['pods']) for r in top]
    early = sum(r['at_ms'] < 5000 for r in top)
    print(f"{src:8s} {st:16s} n={n} p99={p99:.0f} by seed {seedp99}")
    print(f"   on slow pod by arrival 0-2/2-5/5-10/10+ s: {' '.join(share)}; all {100*sum(r['pod']==last for r in rs)/n:.0f}%")
    if ratios:
        print(f"   score ns slow/others at decisions (known {known}/{n}): p10 {pct(ratios,10):.2f} p50 {pct(ratios,50):.2f} p90 {pct(ratios,90):.2f}")
    print(f"   top 1% ({len(top)}): on slow {onslow}, arrived < 5 s {early}, prompt p50 {pct([r['prompt'] for r in top],50):.0f}, true queue at its pod p50 {pct(q,50):.0f} (shortest pod's p50 {pct(minq,50):.0f})")
