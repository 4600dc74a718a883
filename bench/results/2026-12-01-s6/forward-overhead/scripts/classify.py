# classify.py FILE.strace: counts the proxy's read/write/recvfrom by side (client or upstream,
# by the peer port 18001/18002) and result (ok, EAGAIN, other error), from trace.sh's strace -f -yy output.
import re,sys,collections
pend={}
cnt=collections.Counter()
for line in open(sys.argv[1]):
    parts=line.split(None,1)
    if len(parts)<2: continue
    pid,rest=parts
    m=re.match(r'(\w+)\((\d+)<TCP:\[([^\]]*)\]>',rest)
    if m:
        call,fd,addr=m.groups()
        side='up' if ('18001' in addr.split('->')[1] or '18002' in addr.split('->')[1]) else 'client'
        if 'unfinished' in rest:
            pend[pid]=(call,side); continue
        res=rest.rsplit('=',1)[1].strip()
    else:
        m=re.match(r'<\.\.\. (\w+) resumed>',rest)
        if not m or pid not in pend: continue
        call,side=pend.pop(pid)
        res=rest.rsplit('=',1)[1].strip()
    kind='EAGAIN' if 'EAGAIN' in res else ('ok' if not res.startswith('-') else 'err')
    cnt[(call,side,kind)]+=1
for k,v in sorted(cnt.items()): print(k,v)
