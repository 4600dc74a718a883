# usage: cmp.py BASE_STRATEGY FILE.md [FILE.md ...]
# For each R, every strategy in the files against BASE (from the first file
# that has it at that R): pooled p99 ratio and per-seed (per-window) geomean.
import sys, math, re
base = sys.argv[1]
rows = {}
for f in sys.argv[2:]:
    R = None
    for line in open(f):
        m = re.match(r'## R=(\d+)', line)
        if m: R = int(m.group(1))
        if line.startswith('| ') and not line.startswith('| strategy'):
            c = [x.strip() for x in line.split('|')]
            key = (R, c[1] + ('' if f == sys.argv[2] else ' [' + f + ']'))
            rows[key] = (float(c[5].strip('*')), [float(x) for x in c[6].split(',')])
            if c[1] == base and (R, base) not in rows: rows[(R, base)] = rows[key]
for (R, s) in sorted(rows):
    b = rows.get((R, base))
    if not b: continue
    pa, sa = b; pb, sb = rows[(R, s)]
    r = [y / x for x, y in zip(sa, sb)]
    gm = math.exp(sum(math.log(x) for x in r) / len(r))
    print(f"R={R} {s}: {pb:.0f} ms, pooled {pb/pa:.3f}x {base}, per-window {gm:.3f} ({sum(1 for x in r if x<1)} lower/{sum(1 for x in r if x>1)} higher)")
