# usage: perseed.py BASE.md NEW.md [STRATEGY]: per section, STRATEGY's (default probe) p99 by seed new/base: geometric mean, lower/higher counts
import sys, math, re
def read(f, st):
    out, sec = {}, None
    for line in open(f):
        if line.startswith('## '): sec = line.strip()
        elif line.startswith('| %s |' % st):
            cols = [c.strip() for c in line.split('|')]
            out[sec] = [float(x) for x in cols[6].split(',')]
    return out
st = sys.argv[3] if len(sys.argv) > 3 else 'probe'
a, b = read(sys.argv[1], st), read(sys.argv[2], st)
for sec in a:
    r = [y / x for x, y in zip(a[sec], b[sec])]
    g = math.exp(sum(map(math.log, r)) / len(r))
    print(sec, '%s new/base per seed: geomean %.3f, %d lower, %d higher, %d equal' % (st, g, sum(x < 1 for x in r), sum(x > 1 for x in r), sum(x == 1 for x in r)))
