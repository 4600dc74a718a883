# median of watch/base CPU-per-request ratios over every round of the given logs
import sys,statistics as st
rat=[];rr=[]
for f in sys.argv[1:]:
    cur={}
    for l in open(f):
        p=l.split()
        if len(p)==5 and p[1]=='rps':
            if p[0] in cur:
                if 'base' in cur and 'watch' in cur: rat.append(cur['watch'][1]/cur['base'][1]); rr.append(cur['watch'][0]/cur['base'][0])
                cur={}
            cur[p[0]]=(float(p[2]),float(p[4]))
    if 'base' in cur and 'watch' in cur: rat.append(cur['watch'][1]/cur['base'][1]); rr.append(cur['watch'][0]/cur['base'][0])
rat.sort()
print(f"pairs {len(rat)}: cpu ratio median {st.median(rat):.3f}, quartiles {rat[len(rat)//4]:.3f}..{rat[3*len(rat)//4]:.3f}, lower in {sum(r<1 for r in rat)}; rps ratio median {st.median(rr):.3f}")
