# usage: pair.py MAIN_DIR BAND_DIR  (each holding general.json.gz of the same cells)
# probe's pooled p99 (and p50) on the band build over main's, per cell, by
# replica count and fleet; and every cell whose loss flag differs.
import gzip, json, math, collections, sys
a = json.load(gzip.open(sys.argv[1] + '/general.json.gz'))
b = json.load(gzip.open(sys.argv[2] + '/general.json.gz'))
xs = collections.defaultdict(list)
for ca, cb in zip(a, b):
    assert ca['name'] == cb['name']
    pa = {r['name']: r for r in ca['strategies']}['probe']
    pb = {r['name']: r for r in cb['strategies']}['probe']
    x = math.log(pb['ttft_p99_ms'] / pa['ttft_p99_ms'])
    xs['R=%d p99' % ca['replicas']].append(x)
    if ca['replicas'] > 1:
        xs['R=%d p99 %s' % (ca['replicas'], ca['fleet'])].append(x)
        xs['R=%d p50' % ca['replicas']].append(math.log(pb['ttft_p50_ms'] / pa['ttft_p50_ms']))
    for k in ['vs_blind_p99', 'vs_cached_p99', 'vs_blind_p50', 'vs_cached_p50']:
        if ca[k]['loss'] != cb[k]['loss']:
            print('flip', ca['name'], k, ca[k]['ratio'], '->', cb[k]['ratio'], 'loss' if cb[k]['loss'] else 'no loss')
for k, v in xs.items():
    print('%-22s band/main %.4f over %d cells (%d lower, %d higher)' % (k, math.exp(sum(v) / len(v)), len(v), sum(1 for x in v if x < 0), sum(1 for x in v if x > 0)))
