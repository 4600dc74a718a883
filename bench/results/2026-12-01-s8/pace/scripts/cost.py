import json,sys
# usage: cost.py results.json PODS: scrapes per pod per s = scrapes_per_request x achieved req/s / pods (while requests arrive)
r=json.load(open(sys.argv[1])); pods=int(sys.argv[2])
for sc in r['scenarios']:
    for s in sc['strategies']:
        spr=s.get('scrapes_per_request') or 0
        print(f"{sc['name']:16} {s['name']:16} scrapes/request {spr:7.3f}  achieved {s['achieved_rps']:6.2f} req/s  ~{spr*s['achieved_rps']/pods:6.1f} scrapes/pod/s  probes/request {s.get('probes_per_request',0):.2f} errors {s['errors']}")
