import sys, collections
# usage: callers.py stacks SYMSUBSTR [depth]
f, pat = sys.argv[1], sys.argv[2]; depth = int(sys.argv[3]) if len(sys.argv) > 3 else 2
stacks, cur = [], []
for line in open(f):
    line = line.strip()
    if not line:
        if cur: stacks.append(cur); cur = []
        continue
    parts = line.split(None, 1)
    cur.append(parts[1] if len(parts) > 1 else parts[0])
if cur: stacks.append(cur)
tot = len(stacks); c = collections.Counter(); hit = 0
for s in stacks:
    for i, fr in enumerate(s):
        if pat in fr:
            hit += 1
            c[" <- ".join(x.split('(')[0] if False else x for x in s[i+1:i+1+depth])] += 1
            break
print(f"{pat}: {hit}/{tot} = {100*hit/tot:.2f}% of samples (inclusive)")
for k, v in c.most_common(12): print(f"  {100*v/tot:5.2f}%  {k}")
