#!/usr/bin/env python3
# usage: live_ratios.py BASE OTHER results.json [results.json ...]
# Per hold: OTHER/BASE p99 TTFT per seed and their geometric mean; then over all holds
# (seeds pooled), how many were lower, and the sample sd of the log ratio per seed.
import sys, json, math
base, other = sys.argv[1], sys.argv[2]
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
allr = []
for p in sys.argv[3:]:
    r = json.load(open(p))
    for sc in r['scenarios']:
        s = {st['name']: st for st in sc['strategies']}
        if base not in s or other not in s: continue
        a, b = s[base]['ttft_p99_by_seed'], s[other]['ttft_p99_by_seed']
        rr = [y / x for x, y in zip(a, b)]
        allr += rr
        print(f"{p} {sc['name']}: {other}/{base} pooled {s[other]['ttft_ms']['p99']/s[base]['ttft_ms']['p99']:.3f}, per seed {[round(x, 2) for x in rr]}, geomean {gm(rr):.3f}")
if len(allr) > 1:
    g = gm(allr)
    sd = (sum(math.log(x / g) ** 2 for x in allr) / (len(allr) - 1)) ** .5
    print(f"all {len(allr)} seeds: geomean {g:.3f}, {sum(x < 1 for x in allr)} lower, sd of log ratio per seed {sd:.3f}")
