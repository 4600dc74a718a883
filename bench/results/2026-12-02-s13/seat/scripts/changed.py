# usage: changed.py BASE_DIRS... -- NEW_DIRS...: cells whose p99 loss verdict (vs best blind, vs cached) or p50 loss vs blind changes between base and new
import json, sys
i = sys.argv.index('--')
def load(ds):
    out = {}
    for d in ds:
        for c in json.load(open(d + '/general.json')): out[c['name']] = c
    return out
b, n = load(sys.argv[1:i]), load(sys.argv[i + 1:])
for k in sorted(set(b) & set(n)):
    for f in ('vs_blind_p99', 'vs_cached_p99', 'vs_blind_p50'):
        if b[k][f]['loss'] != n[k][f]['loss']:
            print('%-50s %-13s %s %.3f -> %s %.3f%s' % (k, f, 'LOSS' if b[k][f]['loss'] else 'ok', b[k][f]['ratio'], 'LOSS' if n[k][f]['loss'] else 'ok', n[k][f]['ratio'], '  (rival %s)' % n[k][f].get('rival', '') if f != 'vs_cached_p99' else ''))
