# usage: pickmincmp.py LOG [BASE]: per benchmark and binary, the min of each round's 5 runs; the median over rounds of
# those mins and of the per-round ratio min(V)/min(BASE); allocs/op seen; the overall min and median of every run
import sys, re, statistics, collections
base = sys.argv[2] if len(sys.argv) > 2 else 'base'
d = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
al = collections.defaultdict(set)
for line in open(sys.argv[1]):
    m = re.match(r'(\w+) r(\d+) (Benchmark\S+)-\d+\s+\d+\s+(\d+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op', line)
    if m:
        v, r, b = m.group(1), int(m.group(2)), m.group(3)
        d[b][v][r].append(int(m.group(4))); al[(b, v)].add(int(m.group(6)))
for b, vs in sorted(d.items()):
    print(b)
    for v, rs in vs.items():
        mins = {r: min(x) for r, x in rs.items()}
        ratios = [mins[r] / min(vs[base][r]) for r in sorted(mins) if r in vs[base]]
        every = [x for xs in rs.values() for x in xs]
        print('  %-7s round mins: median %5d ns; ratio to %s: median %.3f (%s); all %d runs: min %d median %d; allocs/op %s' % (
            v, statistics.median(mins.values()), base, statistics.median(ratios), ' '.join('%.3f' % x for x in ratios), len(every), min(every), statistics.median(every), sorted(al[(b, v)])))
