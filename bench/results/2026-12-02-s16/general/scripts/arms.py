# usage: arms.py DIR... : sweeps run with -probe VARIANT and -strategies ...,probe,VARIANT (both arms in one
# invocation: same seeds, same rivals). Per dir set: losses of each arm against the best blind policy and cached
# (the sweep's rule: every seed worse and > 5% pooled), geomeans, and the variant's p99 / probe's per cell.
import json, gzip, math, os, sys
def load(dirs):
    out = {}
    for d in dirs:
        p = d + '/general.json'
        f = open(p) if os.path.exists(p) else gzip.open(p + '.gz', 'rt')
        for c in json.load(f): out[c['name']] = c
    return out
cs = load(sys.argv[1:])
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')
blind = ('round_robin', 'random', 'least_inflight')
def runs(c): return {r['name']: r for r in c['strategies']}
def verdict(a, b, key='ttft_p99_ms', seeds='seed_ttft_p99_ms'):
    r = a[key] / b[key]
    worse = sum(x > y for x, y in zip(a[seeds], b[seeds]))
    better = sum(x < y for x, y in zip(a[seeds], b[seeds]))
    n = len(a[seeds])
    return r, worse == n and r > 1.05, better == n and r < 1 / 1.05
arms = [k for k in runs(next(iter(cs.values()))) if k.startswith('probe')]
print('%d cells; arms %s' % (len(cs), arms))
for arm in arms:
    lb = lc = wb = 0; rb = []; rc = []; lossnames = []
    for k, c in cs.items():
        R = runs(c); a = R[arm]
        bb = min((R[x] for x in blind if x in R), key=lambda r: r['ttft_p99_ms'])
        r, l, w = verdict(a, bb); rb.append(r); lb += l; wb += w
        if l: lossnames.append((k, 'blind', bb['name'], r))
        r, l, w = verdict(a, R['cached']); rc.append(r); lc += l
        if l: lossnames.append((k, 'cached', 'cached', r))
    print('%-28s p99 losses vs best blind %3d (wins %3d), vs cached %3d; geomean p99/best blind %.3f, p99/cached %.3f' % (arm, lb, wb, lc, gm(rb), gm(rc)))
    for x in sorted(lossnames, key=lambda t: -t[3]): print('      LOSS %-55s vs %-6s (%s) %.3f' % x)
if len(arms) > 1:
    base = 'probe'
    for arm in arms:
        if arm == base: continue
        r99 = [runs(c)[arm]['ttft_p99_ms'] / runs(c)[base]['ttft_p99_ms'] for c in cs.values()]
        r50 = [runs(c)[arm]['ttft_p50_ms'] / runs(c)[base]['ttft_p50_ms'] for c in cs.values()]
        print('%s / %s: p99 geomean %.3f (%d lower, %d higher; worst %.3f), p50 geomean %.3f' % (arm, base, gm(r99), sum(x < 1 for x in r99), sum(x > 1 for x in r99), max(r99), gm(r50)))
        worst = sorted(((runs(c)[arm]['ttft_p99_ms'] / runs(c)[base]['ttft_p99_ms'], k) for k, c in cs.items()), reverse=True)[:8]
        for r, k in worst: print('      %.3f %s' % (r, k))
