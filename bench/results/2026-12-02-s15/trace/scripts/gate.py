# usage: gate.py RECORDS.jsonl...: per bench -records file, how many pod views (every pod at every
# arrival) had the pod_speed_foreign gate open (view_foreign >= 0.25), how many were scored with a
# speed other than the learned one (score_ns != view_ns), and the largest foreign share seen
import json, sys
for f in sys.argv[1:]:
    n = gate = diff = 0; mx = 0
    for line in open(f):
        for p in json.loads(line)['pods']:
            n += 1
            mx = max(mx, p['view_foreign'])
            gate += p['view_foreign'] >= 0.25
            diff += p['view_ns'] > 0 and abs(p['score_ns'] - p['view_ns']) > 1e-6 * p['view_ns']
    print('%s: pod views %d, gate open %d, scored with a speed other than the learned %d, max foreign share %.3f' % (f.split('/')[-1], n, gate, diff, mx))
