import json,sys,glob,math
# pooled p99 over seeds: recompute from per-half results? results.json pools per hold (3 seeds). Report each hold and the 6-seed view of per-seed p99s.
import statistics as st, os
base=sys.argv[1] if len(sys.argv)>1 else '.'  # the folder holding e_r1_s1 ...
for R in ['r1','r8']:
    rows={}
    for half in ['s1','s4']:
        f=os.path.join(base, f'e_{R}_{half}', 'results.json')
        try: r=json.load(open(f))
        except Exception as e: continue
        for sc in r['scenarios']:
            for s in sc['strategies']:
                d=rows.setdefault(s['name'],{'p99':[], 'seeds':[], 'n':0,'err':0,'ppr':[],'learned':[],'pod':[],'p50':[],'behind':[]})
                d['p99'].append(s['ttft_ms']['p99']); d['p50'].append(s['ttft_ms']['p50'])
                d['seeds']+=s.get('ttft_p99_by_seed') or []
                d['n']+=s['requests']; d['err']+=s['errors']; d['ppr'].append(round(s.get('probes_per_request',0),2))
                d['learned'].append(s.get('learned_speed_ratio_p10_p50_p90')); d['pod'].append(s.get('pod_speed_ratio_p10_p50_p90')); d['behind'].append(s.get('generator_behind'))
    print('==',R)
    for k,d in rows.items():
        gm=math.exp(sum(math.log(x) for x in d['seeds'])/len(d['seeds'])) if d['seeds'] else 0
        print(f"{k:15} n={d['n']} err={d['err']} p99 per hold={d['p99']} p50={d['p50']} seeds={[round(x) for x in d['seeds']]} geomean={gm:.0f} ppr={d['ppr']} learned={d['learned']} pod={d['pod']} behind={d['behind']}")
    def ratio(a,b):
        if a not in rows or b not in rows: return
        x=rows[a]['seeds']; y=rows[b]['seeds']
        r=[p/q for p,q in zip(x,y)]
        gm=math.exp(sum(math.log(v) for v in r)/len(r))
        print(f"  {a}/{b}: per-seed {[round(v,2) for v in r]} geomean {gm:.3f}, lower in {sum(1 for v in r if v<1)}/{len(r)}; per-hold pooled {[round(p/q,2) for p,q in zip(rows[a]['p99'],rows[b]['p99'])]}")
    for a,b in [('probe','probe_learned'),('probe','cached'),('probe_learned','cached'),('probe','least_inflight'),('probe_learned','least_inflight'),('probe','oracle'),('probe_learned','oracle'),('oracle','cached')]:
        ratio(a,b)
