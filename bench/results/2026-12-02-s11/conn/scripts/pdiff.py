import sys,subprocess,re
# pdiff.py BIN A.pprof NA B.pprof NB: per-request µs by function (cum and flat), A minus B
def load(binp,prof,kind):
    args=['go','tool','pprof','-top','-nodecount=600','-nodefraction=0','-edgefraction=0']+(['-cum'] if kind=='cum' else [])+[binp,prof]
    out=subprocess.run(args,capture_output=True,text=True).stdout
    d={}
    for l in out.splitlines():
        m=re.match(r'\s*([\d.]+)(m?s)?\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)(m?s)?\s+[\d.]+%\s+(.*)',l)
        if not m: continue
        f=float(m.group(1))*(1e-3 if m.group(2)=='ms' else 1)
        c=float(m.group(3))*(1e-3 if m.group(4)=='ms' else 1)
        d[m.group(5)]=c if kind=='cum' else f
    return d
b=sys.argv[1]; A=sys.argv[2]; na=int(sys.argv[3]); B=sys.argv[4]; nb=int(sys.argv[5]); top=int(sys.argv[6]) if len(sys.argv)>6 else 40
for kind in ['cum','flat']:
    c=load(b,A,kind); k=load(b,B,kind)
    rows=[((c.get(f,0)/na-k.get(f,0)/nb)*1e6,c.get(f,0)/na*1e6,k.get(f,0)/nb*1e6,f) for f in set(c)|set(k)]
    rows.sort(reverse=True)
    print('==',kind,': A B A-B (µs/req)')
    for r in rows[:top]: print('%6.1f %6.1f %6.1f %s'%(r[1],r[2],r[0],r[3]))
