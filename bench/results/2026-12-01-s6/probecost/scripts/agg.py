import sys, re, collections
# agg.py SCRIPT ROOT_SUBSTR [depth]: inclusive % of samples whose stack contains ROOT, broken down by the frame called from ROOT (next frame toward leaf)
path, root = sys.argv[1], sys.argv[2]
depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
samples = []; cur = []
for line in open(path):
    line = line.rstrip('\n')
    if not line.strip():
        if cur: samples.append(cur); cur = []
        continue
    if line.startswith('\t') or line.startswith(' '):
        parts = line.strip().split(' ', 1)
        if len(parts) == 2:
            sym = parts[1].rsplit(' (', 1)[0]
            sym = re.sub(r'\+0x[0-9a-f]+$', '', sym)
            cur.append(sym)
    else:
        if cur: samples.append(cur)
        cur = []
if cur: samples.append(cur)
n = len(samples)
hit = 0; br = collections.Counter()
for s in samples:  # s[0] leaf ... s[-1] root
    idx = [i for i, f in enumerate(s) if root in f]
    if not idx: continue
    hit += 1
    i = max(idx)  # outermost occurrence
    child = ' <- '.join(reversed(s[max(0, i-depth):i])) if i > 0 else '(self)'
    br[child or '(self)'] += 1
print(f"{root}: {hit}/{n} = {100*hit/n:.2f}%")
for k, v in br.most_common(25):
    print(f"  {100*v/n:6.2f}%  {k}")
