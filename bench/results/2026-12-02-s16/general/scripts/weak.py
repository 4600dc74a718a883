# usage: weak.py DIR...: every cell (distinct names over the dirs' general.json) where the judged
# strategy's pooled p99 TTFT is over 1.05x the best blind policy's or cached's, with the seeds worse
# and the sweep's LOSS verdict (worse in every seed and > 5% pooled); then counts.
import json, gzip, sys, os
def load(dirs):
    out = {}
    for d in dirs:
        p = d + '/general.json'
        f = open(p) if os.path.exists(p) else gzip.open(p + '.gz', 'rt')
        for c in json.load(f): out[c['name']] = c
    return out
cs = load(sys.argv[1:])
rows = []
for k, c in sorted(cs.items()):
    for f, lab in (('vs_blind_p99', 'blind'), ('vs_cached_p99', 'cached')):
        v = c[f]
        if v['ratio'] > 1.05:
            rows.append((v['ratio'], k, lab, v.get('rival', 'cached'), v['seeds_worse'], v['loss']))
rows.sort(reverse=True)
n = len(next(iter(cs.values()))['strategies'][0]['seed_ttft_p99_ms'])
print('%d cells; p99 > 1.05x a rival: %d rows; LOSS (all %d seeds worse): blind %d, cached %d' % (
    len(cs), len(rows), n, sum(c['vs_blind_p99']['loss'] for c in cs.values()), sum(c['vs_cached_p99']['loss'] for c in cs.values())))
for r in rows:
    print('%.3f  %-52s vs %-6s (%s) worse in %d/%d%s' % (r[0], r[1], r[2], r[3], r[4], n, '  LOSS' if r[5] else ''))
