import sys, re, statistics as st, collections
# pairs.py LOG A B: per benchmark, per metric: values in order, medians, pairwise (i-th A vs i-th B) wins
log, A, B = sys.argv[1], sys.argv[2], sys.argv[3]
d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(log):
    p = line.split()
    if len(p) < 3 or p[0] not in (A, B) or not p[1].startswith('Benchmark'): continue
    name = p[1]
    toks = p[3:]
    for i in range(0, len(toks)-1, 2):
        try: v = float(toks[i])
        except: continue
        d[(name, toks[i+1])][p[0]].append(v)
for (name, m), vs in sorted(d.items()):
    if m in ('B/op','allocs/op'): 
        print(f"{name:55s} {m:10s} {A} {st.median(vs[A]):.0f} {B} {st.median(vs[B]):.0f}"); continue
    a, b = vs[A], vs[B]
    n = min(len(a), len(b)); lower = sum(1 for i in range(n) if b[i] < a[i])
    print(f"{name:55s} {m:10s} {A} med {st.median(a):8.2f}  {B} med {st.median(b):8.2f}  ratio {st.median(b)/st.median(a):.3f}  {B} lower in {lower}/{n}")
