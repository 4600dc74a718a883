# usage: groups.py BASE VARIANT DIR: fleetsim -general output DIR/general.json, VARIANT's p99 over BASE's by
# (pod life, replicas) and (pod life, replicas, fleet): geomean, cells lower/higher, the largest ratio
import json, math, sys
base, var, d = sys.argv[1:4]
groups = {}
for c in json.load(open(d + '/general.json')):
    rs = {x['name']: x for x in c['strategies']}
    r = rs[var]['ttft_p99_ms'] / rs[base]['ttft_p99_ms']
    for key in [(c['life'], c['replicas']), (c['life'], c['replicas'], c['fleet'])]:
        groups.setdefault(key, []).append(r)
for k in sorted(groups, key=str):
    v = groups[k]
    print('%s: %d cells, p99 geomean %.3f, %d lower, %d higher, max %.3f' % ('/'.join(map(str, k)), len(v), math.exp(sum(map(math.log, v)) / len(v)), sum(x < 1 for x in v), sum(x > 1 for x in v), max(v)))
