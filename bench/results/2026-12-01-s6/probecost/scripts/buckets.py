import sys,re,collections
def load(path):
    samples=[];cur=[]
    for line in open(path):
        line=line.rstrip('\n')
        if not line.strip():
            if cur: samples.append(cur); cur=[]
            continue
        if line[0] in '\t ':
            p=line.strip().split(' ',1)
            if len(p)==2: cur.append(re.sub(r'\+0x[0-9a-f]+$','',p[1].rsplit(' (',1)[0]))
    if cur: samples.append(cur)
    return samples
B=[('probe fly (wire)','Prober).fly'),('scraper','Scraper).loop'),('Prober.Run','Prober).Run'),('Pick (rest)','Picker).Pick'),
   ('forward RoundTrip','transport).RoundTrip'),('Handle (rest)','Proxy).Handle'),('serveConn (rest)','serveConnCounted'),
   ('sched mcall','runtime.mcall'),('sysmon','runtime.sysmon'),('gc','gcBgMarkWorker'),('timers/other rt','runtime.mstart'),]
def classify(s):
    for name,pat in B:
        if any(pat in f for f in s): return name
    return 'other:'+s[-1][:50]
res={}
for path in sys.argv[1:]:
    ss=load(path); c=collections.Counter(classify(s) for s in ss); res[path]=(len(ss),c)
keys=set()
for n,c in res.values(): keys|=set(c)
print('%-45s'%'bucket'+''.join('%22s'%p.split('-',1)[1][:20] for p in sys.argv[1:]))
for k in sorted(keys,key=lambda k:-max(c[k]/n for n,c in res.values())):
    print('%-45s'%k[:45]+''.join('%21.2f%%'%(100*c[k]/n) for n,c in res.values()))
print('samples', [n for n,c in res.values()])
