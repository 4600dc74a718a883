#!/usr/bin/env python3
# med.py HOLD.log [BASE]: medians (min..max) per target of hold.sh's wrk and veg10k lines, and per-round
# ratios against BASE (default nginx): req/s, CPU us/req, p99.
import sys, statistics as st, collections
runs = collections.defaultdict(lambda: collections.defaultdict(list))  # tool -> target -> [dict]
rnd = 0
for l in open(sys.argv[1]):
    p = l.split()
    if p[:1] == ['round']:
        rnd = int(p[1]); continue
    if p[:1] in (['wrk'], ['veg10k']):
        d = {p[i]: float(p[i+1]) for i in range(2, len(p)-1, 2) if p[i+1].replace('.', '').isdigit()}
        d['round'] = rnd
        runs[p[0]][p[1]].append(d)
base = sys.argv[2] if len(sys.argv) > 2 else 'nginx'
def mm(v): return f"{st.median(v):.1f} ({min(v):.1f}..{max(v):.1f})"
for tool, keys in (('wrk', ('rps', 'p50', 'p99', 'cpu_us_req')), ('veg10k', ('achieved', 'p50', 'p99', 'cpu_us_req'))):
    if tool not in runs: continue
    print(f"## {tool}: median (min..max) over rounds")
    print("| target | n | " + " | ".join(keys) + " |")
    for t, rs in runs[tool].items():
        print(f"| {t} | {len(rs)} | " + " | ".join(mm([r[k] for r in rs]) for k in keys) + " |")
    if base in runs[tool]:
        b = {r['round']: r for r in runs[tool][base]}
        print(f"\nper-round ratios to {base} (median (min..max); rounds where the target is better)")
        for t, rs in runs[tool].items():
            if t == base: continue
            pr = [(r, b[r['round']]) for r in rs if r['round'] in b]
            k0 = keys[0]
            q = [r[k0]/x[k0] for r, x in pr]; c = [r['cpu_us_req']/x['cpu_us_req'] for r, x in pr]; p = [r['p99']/x['p99'] for r, x in pr]
            print(f"- {t}: {k0} {st.median(q):.3f} ({min(q):.3f}..{max(q):.3f}), higher in {sum(v>1 for v in q)}/{len(q)}; "
                  f"CPU/req {st.median(c):.3f} ({min(c):.3f}..{max(c):.3f}), lower in {sum(v<1 for v in c)}/{len(c)}; "
                  f"p99 {st.median(p):.3f} ({min(p):.3f}..{max(p):.3f}), lower in {sum(v<1 for v in p)}/{len(p)}")
    print()
