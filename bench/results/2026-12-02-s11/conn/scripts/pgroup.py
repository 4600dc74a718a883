import sys,subprocess,re,collections
# pgroup.py BIN A.pprof NA B.pprof NB: flat µs/req grouped by package, A and B
def load(binp,prof):
    out=subprocess.run(['go','tool','pprof','-top','-nodecount=2000','-nodefraction=0','-edgefraction=0',binp,prof],capture_output=True,text=True).stdout
    d=collections.Counter()
    for l in out.splitlines():
        m=re.match(r'\s*([\d.]+)(m?s)?\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)(m?s)?\s+[\d.]+%\s+(.*)',l)
        if not m: continue
        f=float(m.group(1))*(1e-3 if m.group(2)=='ms' else 1)
        fn=m.group(5)
        if 'Syscall6' in fn or fn.startswith('syscall.') : pk='SYSCALL'
        else:
            pk=re.sub(r'\.\(?\*?[A-Za-z_].*$','',fn.split(' ')[0])
            pk=fn.split('.')[0] if '/' not in fn else fn.rsplit('/',1)[0]+'/'+fn.rsplit('/',1)[1].split('.')[0]
        d[pk]+=f
    return d
b=sys.argv[1]; a=load(b,sys.argv[2]); na=int(sys.argv[3]); c=load(b,sys.argv[4]); nc=int(sys.argv[5])
rows=sorted(set(a)|set(c),key=lambda k:-(a[k]/na-c[k]/nc))
for k in rows[:25]: print('%6.1f %6.1f %6.1f %s'%(a[k]/na*1e6,c[k]/nc*1e6,a[k]/na*1e6-c[k]/nc*1e6,k))
