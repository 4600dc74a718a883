# usage: sweepcmp.py BASE_DIR NEW_DIR...: losses (general.json's verdicts) and the geomean of probe's p99 over the best blind, base vs new, over the cells of all dirs (distinct cell names)
import json, math, sys
def load(dirs):
    out = {}
    for d in dirs:
        for c in json.load(open(d + '/general.json')): out[c['name']] = c
    return out
half = len(sys.argv[1:]) // 2
b, n = load(sys.argv[1:1 + half]), load(sys.argv[1 + half:])
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs))
for name, cs in (('base', b), ('new', n)):
    v = list(cs.values())
    def cnt(k, f): return sum(c[k][f] for c in v)
    bl = [c['name'] for c in v if c['vs_blind_p99']['loss']]
    print('%s: %d cells; p99 vs best blind: %d losses, %d wins, geomean %.3f; vs cached: %d losses, %d wins, geomean %.3f; p50 losses vs blind %d, vs cached %d' % (
        name, len(v), cnt('vs_blind_p99', 'loss'), cnt('vs_blind_p99', 'win'), gm([c['vs_blind_p99']['ratio'] for c in v]),
        cnt('vs_cached_p99', 'loss'), cnt('vs_cached_p99', 'win'), gm([c['vs_cached_p99']['ratio'] for c in v]), cnt('vs_blind_p50', 'loss'), cnt('vs_cached_p50', 'loss')))
    for x in bl: print('   blind loss', x, cs[x]['vs_blind_p99']['rival'], cs[x]['vs_blind_p99']['ratio'])
common = sorted(set(b) & set(n))
r = [n[k]['vs_blind_p99']['ratio'] / b[k]['vs_blind_p99']['ratio'] for k in common]
def pr(c, s): return {x['name']: x for x in c['strategies']}['probe']['ttft_p%s_ms' % s]
r99 = [pr(n[k], '99') / pr(b[k], '99') for k in common]
r50 = [pr(n[k], '50') / pr(b[k], '50') for k in common]
print('probe new/base over %d cells: p99 geomean %.3f (%d lower, %d higher), p50 geomean %.3f' % (len(common), gm(r99), sum(x < 1 for x in r99), sum(x > 1 for x in r99), gm(r50)))
