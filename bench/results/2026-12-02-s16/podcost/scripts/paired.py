#!/usr/bin/env python3
"""paired.py A B DIR...: per seed, p99 TTFT of arms A and B of the live bench
(one invocation per seed, both arms on the same requests), A/B per seed and
their geometric mean, and scrapes per pod per second (scrapes_per_request x
achieved req/s / servers)."""
import json, math, sys, glob, os
a, b, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for d in dirs:
    for f in sorted(glob.glob(f"{d}/s*/results.json"), key=lambda f: int(f.split(os.sep)[-2][1:])):
        sc = json.load(open(f))["scenarios"][0]
        st = {x["name"]: x for x in sc["strategies"]}
        pods = sc["params"]["servers"]
        seed = int(f.split(os.sep)[-2][1:])
        sp = {n: st[n]["scrapes_per_request"] * st[n]["achieved_rps"] / pods for n in (a, b)}
        rows.append((seed, st[a]["ttft_ms"]["p99"], st[b]["ttft_ms"]["p99"], st[a]["ttft_ms"]["p50"], st[b]["ttft_ms"]["p50"], sp[a], sp[b],
                     st[a]["errors"] + st[b]["errors"], st[a]["probes_per_request"], st[b]["probes_per_request"]))
print(f"| seed | {a} p99 | {b} p99 | p99 ratio | p50 ratio | scrapes/pod/s {a} | {b} | errors | probes/req {a} / {b} |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]:,.0f} | {r[2]:,.0f} | {r[1]/r[2]:.3f} | {r[3]/r[4]:.3f} | {r[5]:.1f} | {r[6]:.1f} | {r[7]} | {r[8]:.3f} / {r[9]:.3f} |")
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print(f"\n{len(rows)} seeds: p99 {a}/{b} geomean {g([r[1]/r[2] for r in rows]):.3f} (lower in {sum(r[1]<r[2] for r in rows)}), "
      f"p50 {g([r[3]/r[4] for r in rows]):.3f}; scrapes per pod per s {sum(r[5] for r in rows)/len(rows):.1f} vs {sum(r[6] for r in rows)/len(rows):.1f}; errors {sum(r[7] for r in rows)}")
