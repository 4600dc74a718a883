import re,sys,statistics as st
runs={}
cur=None
for line in open(sys.argv[1]):
    m=re.match(r'(\S+) rate=(\d+) mw=(\d+) achieved=(\d+) p50=([\d.]+) p99=([\d.]+) succ=([\d.]+) cpu_us_per_req=([\d.]+) .*gcs=(\d+) load=([\d.]+)',line)
    if m:
        cur=dict(name=m[1],ach=int(m[4]),p50=float(m[5]),p99=float(m[6]),cpu=float(m[8]),gcs=int(m[9]),load=float(m[10]))
        runs.setdefault(m[1],[]).append(cur); continue
    m=re.match(r'\s+behind: windows>=100 in flight (\d+) of (\d+); max in flight (\d+); first behind at window (\S+); back below 50 after: (\S+)',line)
    if m and cur: cur.update(beh=int(m[1]),nw=int(m[2]),maxin=int(m[3]),rec=m[5]=='True')
    m=re.match(r'\s+conns cl/up: (.*)',line)
    if m and cur:
        cl=[int(x.split('/')[0]) for x in m[1].split()]; cur['maxcl']=max(cl) if cl else 0; cur['lastcl']=cl[-1] if cl else 0
def med(x): return st.median(x)
print("| target | runs | achieved req/s median | p99 ms median (per run) | CPU µs/req median | windows >= 100 in flight (per run) | runs behind | client conns max (per run) |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted(runs):
    r=runs[k]
    print("| %s | %d | %.0f | **%.1f** (%s) | %.1f | %s | %d of %d | %s |"%(k,len(r),med([x['ach'] for x in r]),med([x['p99'] for x in r])," ".join("%.0f"%x['p99'] for x in r),med([x['cpu'] for x in r])," ".join("%d"%x.get('beh',-1) for x in r)+" of %d"%r[0].get('nw',0),sum(1 for x in r if x.get('beh',0)>0),len(r)," ".join(str(x.get('maxcl','?')) for x in r)))
