# usage: pickmed.py LOG: median ns/op per binary and benchmark (and every run)
import sys, re, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'(\w+) (Benchmark\S+)-\d+\s+\d+\s+(\d+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op', line)
    if m: d[(m.group(2), m.group(1))].append((int(m.group(3)), int(m.group(5))))
for (b, v), xs in sorted(d.items()):
    print('%-75s %-5s median %5d ns  allocs %s  runs %s' % (b, v, statistics.median(x[0] for x in xs), sorted(set(x[1] for x in xs)), [x[0] for x in xs]))
