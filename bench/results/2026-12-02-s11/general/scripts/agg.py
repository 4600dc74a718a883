import json,math,collections,sys
import gzip
cells=json.load(gzip.open(sys.argv[1]) if sys.argv[1].endswith('.gz') else open(sys.argv[1])); ref=sys.argv[2] if len(sys.argv)>2 else 'probe'
names=[r['name'] for r in cells[0]['strategies']]
for metric in ['ttft_p99_ms','ttft_p50_ms']:
  print(metric)
  for n in names:
    xs=[];by=collections.defaultdict(list)
    for c in cells:
      d={r['name']:r for r in c['strategies']}
      x=math.log(d[n][metric]/d[ref][metric]); xs.append(x); by[c['sizes']].append(x); by['r%d'%c['replicas']].append(x); by[c['arrivals']].append(x)
    print('  %-16s all %.3f max %.3f | '%(n,math.exp(sum(xs)/len(xs)),math.exp(max(xs)))+' '.join('%s %.3f'%(k,math.exp(sum(v)/len(v))) for k,v in by.items()))
