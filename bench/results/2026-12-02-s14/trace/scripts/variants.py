# usage: variants.py BASE VARIANT[,VARIANT...] DIR [DIR...]: for fleetsim
# -general outputs (DIR/general.json) whose strategies include BASE and the
# variants, each variant against BASE cell by cell (p99 and p50 ratio
# geomeans, cells lower/higher) and each one's losses by general.go's rule
# (worse than the rival in every seed and by more than 5% pooled) against
# the best blind policy and against cached, with the cells that lose.
import json, sys, math
base, variants, dirs = sys.argv[1], sys.argv[2].split(','), sys.argv[3:]
blind = {'round_robin', 'random', 'least_inflight'}
cells = []
for d in dirs:
    cells += json.load(open(d + '/general.json'))
def loss(p, r):
    ratio = p['ttft_p99_ms'] / r['ttft_p99_ms'] if r['ttft_p99_ms'] > 0 else 0
    worse = all(a > b for a, b in zip(p['seed_ttft_p99_ms'], r['seed_ttft_p99_ms']))
    return worse and ratio > 1.05, ratio
def runs(c): return {x['name']: x for x in c['strategies']}


for s in [base] + variants:
    lb, lc, r99, r50, lo, hi = [], [], [], [], 0, 0
    for c in cells:
        rs = runs(c)
        if s not in rs: continue
        p = rs[s]
        bb = min((rs[n] for n in rs if n in blind), key=lambda x: x['ttft_p99_ms'])
        l, ratio = loss(p, bb)
        if l: lb.append('%s %.3f (%s)' % (c['name'], ratio, bb['name']))
        l, ratio = loss(p, rs['cached'])
        if l: lc.append(c['name'])
        b = rs[base]
        r99.append(p['ttft_p99_ms'] / b['ttft_p99_ms']); r50.append(p['ttft_p50_ms'] / b['ttft_p50_ms'])
        lo += r99[-1] < 1; hi += r99[-1] > 1
    g = lambda r: math.exp(sum(map(math.log, r)) / len(r))
    print(f"{s}: {len(r99)} cells; p99/{base} geomean {g(r99):.3f} ({lo} lower, {hi} higher), p50 {g(r50):.3f}; losses vs best blind {len(lb)}, vs cached {len(lc)}")
    for x in lb: print('   blind loss:', x)
