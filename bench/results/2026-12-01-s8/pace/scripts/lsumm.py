import json,sys,math
# usage: lsumm.py results.json [pairs a/b ...]: per variant, per strategy: pooled p99, per-seed p99s, errors, probes/request; per-seed ratios
r=json.load(open(sys.argv[1]))
pairs=[p.split('/') for p in sys.argv[2:]]
for sc in r['scenarios']:
    print('==',sc['name'])
    rows={}
    for s in sc['strategies']:
        rows[s['name']]=s
        print(f"{s['name']:16} n={s['requests']} err={s['errors']} p50={s['ttft_ms']['p50']:.0f} p99={s['ttft_ms']['p99']:.0f} seeds={[round(x) for x in s.get('ttft_p99_by_seed') or []]} ppr={s.get('probes_per_request',0):.2f} behind={s.get('generator_behind')}")
    for a,b in pairs:
        if a in rows and b in rows:
            x=rows[a].get('ttft_p99_by_seed'); y=rows[b].get('ttft_p99_by_seed')
            rr=[p/q for p,q in zip(x,y)]; gm=math.exp(sum(map(math.log,rr))/len(rr))
            print(f"  {a}/{b}: pooled {rows[a]['ttft_ms']['p99']/rows[b]['ttft_ms']['p99']:.3f}, per-seed {[round(v,2) for v in rr]} geomean {gm:.3f}, lower in {sum(v<1 for v in rr)}/{len(rr)}")
