# usage: perseed2.py FILE.md REF STRATEGY...: per section, each STRATEGY's p99 by seed over REF's in the same file: geomean, lower/higher
import sys, math
def read(f):
    out, sec = {}, None
    for line in open(f):
        if line.startswith('## '): sec = line.strip()
        elif line.startswith('| ') and sec:
            cols = [c.strip() for c in line.split('|')]
            try: out.setdefault(sec, {})[cols[1]] = [float(x) for x in cols[6].split(',')]
            except (ValueError, IndexError): pass
    return out
d = read(sys.argv[1]); ref = sys.argv[2]
for sec, m in d.items():
    for st in sys.argv[3:]:
        r = [y / x for x, y in zip(m[ref], m[st])]
        g = math.exp(sum(map(math.log, r)) / len(r))
        print(sec[:40], '%s / %s per seed: %.3f, %d lower, %d higher' % (st, ref, g, sum(x < 1 for x in r), sum(x > 1 for x in r)))
