import sys,statistics as st,collections
runs=[];rounds=[];cur={}
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)==5 and p[1]=='rps':
        name,rps,cpu=p[0],float(p[2]),float(p[4])
        if name in cur: rounds.append(cur); cur={}
        cur[name]=(rps,cpu)
if cur: rounds.append(cur)
names=list(rounds[0])
for n in names:
    r=[x[n] for x in rounds if n in x]
    print(f"{n}: n={len(r)} rps median {st.median(a for a,b in r):.0f}  cpu us/req median {st.median(b for a,b in r):.1f} (min {min(b for a,b in r)} max {max(b for a,b in r)})")
for n in names:
    if n=='base': continue
    rat=[x[n][1]/x['base'][1] for x in rounds if n in x and 'base' in x]
    rr=[x[n][0]/x['base'][0] for x in rounds if n in x and 'base' in x]
    print(f"{n}/base cpu per round: median {st.median(rat):.3f} ({min(rat):.3f}..{max(rat):.3f}), lower in {sum(r<1 for r in rat)} of {len(rat)}; rps ratio median {st.median(rr):.3f}")
