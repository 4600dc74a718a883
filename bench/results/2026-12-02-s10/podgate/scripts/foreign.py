#!/usr/bin/env python3
# usage: foreign.py RECORDS_DIR...   (bench -records output, .jsonl or .jsonl.gz)
# Per strategy: pod views read at arrivals, how many had a foreign share >= 0.25
# (the gate open), and the share's p50 / p90 / max.
import sys, json, glob, gzip, collections
for d in sys.argv[1:]:
    by = collections.defaultdict(list)
    for f in sorted(glob.glob(d + '/*.jsonl*')):
        op = gzip.open if f.endswith('.gz') else open
        strat = f.split('/')[-1].split('_probe')[0]
        name = 'probe' + f.split('_probe', 1)[1].rsplit('_s', 1)[0] if '_probe' in f else f
        for line in op(f, 'rt'):
            r = json.loads(line)
            by[name] += [p.get('view_foreign', 0) for p in r['pods']]
    for name, v in sorted(by.items()):
        v.sort(); q = lambda x: v[int(x * (len(v) - 1))]
        print(f"{d} {name}: {len(v)} pod views, gate open (>= 0.25) at {sum(x >= 0.25 for x in v)}, share p50 {q(.5):.3f} p90 {q(.9):.3f} max {v[-1]:.3f}")
