import sys,json
for l in sys.stdin:
  try: j=json.loads(l)
  except: print(l.strip()); continue
  p=j["per_req"]; sent=sum(p.get(k,0) for k in ("ok","timeout","error","cancelled"))
  print(f'{j["bin"]:16s} {j["policy"]:15s} {j.get("tag",""):10s} rate {j["rate"]:5d} ach {j["gen"]["achieved_rps"]:8.0f} cpu {j["cpu_us_req"]:6.1f} p50 {j["gen"]["latency_ms"]["p50"]:7.2f} p99 {j["gen"]["latency_ms"]["p99"]:7.2f} sent {sent:.3f} coal {p.get("coalesced",0):.3f} fresh {p.get("skipped_fresh",0):.2f} rec {p.get("skipped_recent",0):.2f} slow {p.get("skipped_slow",0):.2f} to {p.get("timeout",0):.3f}')
