# usage: livecmp.py HOLDDIR...: per hold and binary (HOLD/base, HOLD/new), probe's pooled p99 TTFT, per-seed
# p99, errors, probes per request; new/base pooled per hold; then new/base per seed over all holds
import json, sys, math, os
def load(p):
    r = json.load(open(os.path.join(p, 'results.json')))
    return {s['name']: s for s in r['scenarios'][0]['strategies']}, r['scenarios'][0]['params']['offered_rps']
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs))
per = []
for h in sys.argv[1:]:
    for v in ('base', 'new'):
        s, rps = load(os.path.join(h, v))
        x = s['probe']
        print('%s %s (offered %.2f rps): probe p99 %.0f by seed %s, p50 %.0f, errors %d, probes/req %.2f' % (h, v, rps, x['ttft_ms']['p99'], [round(y) for y in x['ttft_p99_by_seed']], x['ttft_ms']['p50'], x['errors'], x.get('probes_per_request', 0)))
    b, _ = load(os.path.join(h, 'base')); n, _ = load(os.path.join(h, 'new'))
    per += [y / x for x, y in zip(b['probe']['ttft_p99_by_seed'], n['probe']['ttft_p99_by_seed'])]
    print('   probe new/base pooled %.3f' % (n['probe']['ttft_ms']['p99'] / b['probe']['ttft_ms']['p99']))
print('probe new/base per seed over all holds: %s, geomean %.3f (%d lower of %d)' % (' '.join('%.3f' % x for x in per), gm(per), sum(x < 1 for x in per), len(per)))
