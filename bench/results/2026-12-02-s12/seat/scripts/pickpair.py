# usage: pickpair.py LOG...: per benchmark, the ratio new/base of each alternation (base and new run back to back), and the median ratio
import sys, re, statistics, collections
for f in sys.argv[1:]:
    d = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(f):
        m = re.match(r'(\w+) (Benchmark\S+)-\d+\s+\d+\s+(\d+) ns/op', line)
        if m: d[m.group(2)][m.group(1)].append(int(m.group(3)))
    for b, v in sorted(d.items()):
        r = [n / o for o, n in zip(v['base'], v['new'])]
        print('%s %-62s median ratio %.3f  (%s)' % (f.split('/')[-1], b, statistics.median(r), ' '.join('%.2f' % x for x in r)))
