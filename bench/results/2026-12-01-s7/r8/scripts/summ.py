import sys,math,re,os
def load(f):
    out={}; R=None
    for line in open(f):
        m=re.match(r'## R=(\d+)',line)
        if m: R=int(m.group(1))
        if line.startswith('| ') and not line.startswith('| strategy') and not line.startswith('|---'):
            c=[x.strip() for x in line.split('|')]
            try: out[(R,c[1])]=(float(c[5].strip('*')),[float(x) for x in c[6].split(',')])
            except: pass
    return out
V=[l.split('\t') for l in open(sys.argv[1]).read().strip().split('\n')]
base=load('x_base16.md')
print('| variant | env (temporary build) | what | strategy | R=1 p99 ms (ratio, per-window geomean) | R=8 p99 ms (ratio, per-window geomean, windows better/worse) |')
print('|---|---|---|---|---|---|')
for name,env,what in V:
    d=load('x_%s.md'%name)
    for st in ['probe','probe_pod']:
        if (1,st) not in d: continue
        cells=[]
        for R in (1,8):
            pb,sb=base[(R,'probe')]; pv,sv=d[(R,st)]
            r=[y/x for x,y in zip(sb,sv)]; gm=math.exp(sum(map(math.log,r))/len(r))
            cells.append('%.0f (%.3f, %.3f%s)'%(pv,pv/pb,gm, ', %d/%d'%(sum(x<1 for x in r),sum(x>1 for x in r)) if R==8 else ''))
        print('| %s | `%s` | %s | %s | %s | %s |'%(name,env,what,st,cells[0],cells[1]))
