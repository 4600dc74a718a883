import sys,json,statistics as st
rows=[json.loads(l) for l in open(sys.argv[1])]
from collections import defaultdict
g=defaultdict(list)
for j in rows:
    p=j["per_req"]; sent=sum(p.get(k,0) for k in ("ok","timeout","error","cancelled"))
    g[(j["rate"],j["bin"],j["policy"])].append((j["cpu_us_req"],j["gen"]["latency_ms"]["p99"],sent,p.get("coalesced",0)))
for k in sorted(g):
    v=g[k]
    print(f'{k[0]:6d} {k[1]:16s} {k[2]:15s} cpu med {st.median(x[0] for x in v):6.1f} ({" ".join(str(x[0]) for x in v)})  p99 med {st.median(x[1] for x in v):7.2f}  probes/req {st.median(x[2] for x in v):.3f} coalesced/req {st.median(x[3] for x in v):.3f}')
