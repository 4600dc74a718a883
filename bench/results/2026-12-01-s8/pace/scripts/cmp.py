import sys,math,re
def load(f):
    out={}; R=None
    for line in open(f):
        m=re.match(r'## R=(\d+)',line)
        if m: R=int(m.group(1))
        if line.startswith('| ') and not line.startswith('| strategy') :
            c=[x.strip() for x in line.split('|')]
            out[(R,c[1])]=(float(c[5].strip('*')),[float(x) for x in c[6].split(',')])
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
for k in sorted(a):
    for k2 in sorted(b):
        if k2[0]!=k[0]: continue
        pa,sa=a[k]; pb,sb=b[k2]
        r=[y/x for x,y in zip(sa,sb)]
        gm=math.exp(sum(math.log(x) for x in r)/len(r))
        print(f"R={k[0]} {k[1]} -> {k2[1]}: pooled {pa:.0f} -> {pb:.0f} ({pb/pa:.3f}x), per-seed geomean {gm:.3f}, better {sum(1 for x in r if x<1)}/{len(r)}, worse {sum(1 for x in r if x>1)}")
