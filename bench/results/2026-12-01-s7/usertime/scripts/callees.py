import sys, collections
f, pat = sys.argv[1], sys.argv[2]
stacks, cur = [], []
for line in open(f):
    line = line.strip()
    if not line:
        if cur: stacks.append(cur); cur = []
        continue
    parts = line.split(None, 1)
    cur.append(parts[1] if len(parts) > 1 else parts[0])
if cur: stacks.append(cur)
tot = len(stacks); c = collections.Counter(); hit=0
for s in stacks:
    for i, fr in enumerate(s):
        if pat in fr:
            hit+=1
            c[s[i-1] if i > 0 else "(self)"] += 1
            break
print(f"{pat}: {100*hit/tot:.2f}%")
for k, v in c.most_common(10): print(f"  {100*v/tot:5.2f}%  {k}")
