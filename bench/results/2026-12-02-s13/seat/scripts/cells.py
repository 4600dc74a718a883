# usage: cells.py BASE_DIR NEW_DIR PREFIX: cell by cell (names starting with PREFIX), probe p99 before/after and its ratio to the best blind and to cached (LOSS marks), p50 ratio new/base
import json, sys, math
b = {c['name']: c for c in json.load(open(sys.argv[1] + '/general.json'))}
n = {c['name']: c for c in json.load(open(sys.argv[2] + '/general.json'))}
pre = sys.argv[3]
def pr(c, s): return {x['name']: x for x in c['strategies']}['probe']['ttft_p%s_ms' % s]
def v(c, k): x = c[k]; return '%.3f%s' % (x['ratio'], ' LOSS' if x['loss'] else '')
print('| cell | probe p99 before | after | after/before | /best blind before | after | /cached before | after | p50 after/before |')
print('|---|---|---|---|---|---|---|---|---|')
r = []
for k in b:
    if not k.startswith(pre) or k not in n: continue
    r.append(pr(n[k], '99') / pr(b[k], '99'))
    print('| %s | %.0f | %.0f | %.3f | %s | %s | %s | %s | %.3f |' % (k, pr(b[k], '99'), pr(n[k], '99'), r[-1], v(b[k], 'vs_blind_p99'), v(n[k], 'vs_blind_p99'), v(b[k], 'vs_cached_p99'), v(n[k], 'vs_cached_p99'), pr(n[k], '50') / pr(b[k], '50')))
g = math.exp(sum(map(math.log, r)) / len(r))
print('\n%d cells: probe p99 after/before geomean %.3f, %d lower, %d higher' % (len(r), g, sum(x < 1 for x in r), sum(x > 1 for x in r)))
for name, d in (('before', b), ('after', n)):
    cs = [d[k] for k in d if k.startswith(pre)]
    print('%s: losses vs best blind %d, vs cached %d; geomean p99/best blind %.3f, p99/cached %.3f' % (name, sum(c['vs_blind_p99']['loss'] for c in cs), sum(c['vs_cached_p99']['loss'] for c in cs),
        math.exp(sum(math.log(c['vs_blind_p99']['ratio']) for c in cs) / len(cs)), math.exp(sum(math.log(c['vs_cached_p99']['ratio']) for c in cs) / len(cs))))
