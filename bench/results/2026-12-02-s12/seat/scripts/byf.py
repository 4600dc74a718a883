# usage: byf.py general.json STRATEGY [REF]: p99 and p50 geomean of STRATEGY over REF (default probe) by sizes x replicas, and by fleet
import gzip, json, sys, math, collections
f = sys.argv[1]; st = sys.argv[2]; ref = sys.argv[3] if len(sys.argv) > 3 else 'probe'
cells = json.load(gzip.open(f) if f.endswith('.gz') else open(f))
def gm(xs): return math.exp(sum(math.log(x) for x in xs) / len(xs))
for key in (lambda c: (c['sizes'], c['replicas']), lambda c: (c['fleet'], c['arrivals'])):
    g = collections.defaultdict(lambda: ([], []))
    for c in cells:
        d = {r['name']: r for r in c['strategies']}
        g[key(c)][0].append(d[st]['ttft_p99_ms'] / d[ref]['ttft_p99_ms'])
        g[key(c)][1].append(d[st]['ttft_p50_ms'] / d[ref]['ttft_p50_ms'])
    for k in sorted(g): print(k, 'n=%d p99 %.3f p50 %.3f' % (len(g[k][0]), gm(g[k][0]), gm(g[k][1])))
