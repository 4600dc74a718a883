# usage: tab.py general.json[.gz] [REF]: every strategy's pooled p99/p50 (ms) per cell, and p99 over REF's (default probe)
import gzip, json, sys
f = sys.argv[1]
cells = json.load(gzip.open(f) if f.endswith('.gz') else open(f))
ref = sys.argv[2] if len(sys.argv) > 2 else 'probe'
names = [r['name'] for r in cells[0]['strategies']]
print('cell | ' + ' | '.join(names))
for c in cells:
    d = {r['name']: r for r in c['strategies']}
    print(c['name'], '|', ' | '.join('%.0f/%.0f(%.2f)' % (d[n]['ttft_p99_ms'], d[n]['ttft_p50_ms'], d[n]['ttft_p99_ms'] / d[ref]['ttft_p99_ms']) for n in names))
