import sys,math,re
sys.path.insert(0,'/tmp/r8')
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
W=[('th','trace hetero (4 pods, one 2x)'),('tm','trace homogeneous'),('l80','lognormal 8 pods (steady_80-like)'),('lh','lognormal 8 pods, one 2x'),('px','prefix (R=1 only)')]
rows=[l.split('\t') for l in open(sys.argv[1]).read().strip().split('\n')]
print('| variant | '+' | '.join(w[1] for w in W)+' |')
print('|---|'+'---|'*len(W))
for name,file,st,desc in rows:
    cells=[]
    for w,_ in W:
        try: b=load('/tmp/r8/g_base_%s.md'%w); d=load('/tmp/r8/g_%s_%s.md'%(file,w))
        except FileNotFoundError: cells.append(''); continue
        parts=[]
        for R in (1,8):
            if (R,st) not in d: continue
            pb,sb=b[(R,'probe')]; pv,sv=d[(R,st)]
            r=[y/x for x,y in zip(sb,sv)]; gm=math.exp(sum(map(math.log,r))/len(r))
            parts.append('R=%d %.0f (%.2f, %.2f)'%(R,pv,pv/pb,gm))
        cells.append('<br>'.join(parts))
    print('| **%s**: %s | %s |'%(name,desc,' | '.join(cells)))
