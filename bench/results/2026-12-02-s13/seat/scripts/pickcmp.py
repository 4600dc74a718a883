# usage: pickcmp.py LOG [BASE]: per benchmark and binary, the median ns/op, allocs, and the median of the per-alternation ratios to BASE (default base; runs paired in order)
import sys, re, statistics, collections
base = sys.argv[2] if len(sys.argv) > 2 else 'base'
d = collections.defaultdict(lambda: collections.defaultdict(list))
al = collections.defaultdict(set)
for line in open(sys.argv[1]):
    m = re.match(r'(\w+) (Benchmark\S+)-\d+\s+\d+\s+(\d+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op', line)
    if m:
        d[m.group(2)][m.group(1)].append(int(m.group(3))); al[(m.group(2), m.group(1))].add(int(m.group(5)))
for b, vs in sorted(d.items()):
    print(b)
    for v, xs in vs.items():
        r = [n / o for o, n in zip(vs[base], xs)]
        print('  %-6s min %5d median %5d ns  allocs %s  ratio to %s: median %.3f (%s)  runs %s' % (v, min(xs), statistics.median(xs), sorted(al[(b, v)]), base, statistics.median(r), ' '.join('%.3f' % x for x in r), xs))
