# usage: cmp.py general.json [REF]: per strategy (probe-like ones): pooled p99 geomean over REF (default probe), over the cell's best blind and over cached;
# losses (worse in every seed and by >5% pooled) against best blind and cached; p50 geomean over REF.
import gzip, json, sys, math
f = sys.argv[1]
cells = json.load(gzip.open(f) if f.endswith('.gz') else open(f))
ref = sys.argv[2] if len(sys.argv) > 2 else 'probe'
blind = ['round_robin', 'random', 'least_inflight']
names = [r['name'] for r in cells[0]['strategies']]
def gm(xs): return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float('nan')
def loss(a, b):
    return all(x > y for x, y in zip(a['seed_ttft_p99_ms'], b['seed_ttft_p99_ms'])) and a['ttft_p99_ms'] > 1.05 * b['ttft_p99_ms']
print('%-22s %8s %8s %8s %6s %6s %8s %s' % ('strategy', 'p99/ref', 'p99/bld', 'p99/cch', 'Lbld', 'Lcch', 'p50/ref', 'worst/blind'))
for n in names:
    if n in blind or n == 'cached': continue
    r1, r2, r3, r5 = [], [], [], []
    lb = lc = 0
    worst = (0, '')
    for c in cells:
        d = {r['name']: r for r in c['strategies']}
        s = d[n]
        bb = min((d[b] for b in blind if b in d), key=lambda r: r['ttft_p99_ms'])
        r1.append(s['ttft_p99_ms'] / d[ref]['ttft_p99_ms'])
        r5.append(s['ttft_p50_ms'] / d[ref]['ttft_p50_ms'])
        x = s['ttft_p99_ms'] / bb['ttft_p99_ms']
        r2.append(x)
        if x > worst[0]: worst = (x, c['name'])
        if 'cached' in d: r3.append(s['ttft_p99_ms'] / d['cached']['ttft_p99_ms'])
        lb += loss(s, bb)
        lc += 'cached' in d and loss(s, d['cached'])
    print('%-22s %8.3f %8.3f %8.3f %6d %6d %8.3f %.3f %s' % (n, gm(r1), gm(r2), gm(r3), lb, lc, gm(r5), worst[0], worst[1]))
