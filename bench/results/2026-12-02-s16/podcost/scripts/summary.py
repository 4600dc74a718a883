#!/usr/bin/env python3
"""summary.py DIR [BASE]: per cell, per strategy: p99 TTFT per seed, the
geometric mean of the per-seed ratio to BASE (default probe+fc=0),
scrapes and probes per pod per second (mean over seeds)."""
import json, math, sys, glob, os
root = sys.argv[1]
base = sys.argv[2] if len(sys.argv) > 2 else "probe+fc=0"
cells = sorted({p.split(os.sep)[-3] for p in glob.glob(f"{root}/*/s*/results.json")},
               key=lambda c: (int(c[1:c.index('r')]), int(c[c.index('r')+1:])))
for cell in cells:
    runs = {}
    for f in sorted(glob.glob(f"{root}/{cell}/s*/results.json"), key=lambda f: int(f.split(os.sep)[-2][1:])):
        seed = int(f.split(os.sep)[-2][1:])
        for sc in json.load(open(f))["scenarios"]:
            for st in sc["strategies"]:
                runs.setdefault(st["name"], {})[seed] = st
    seeds = sorted(runs.get(base, {}))
    print(f"\n### {cell} (seeds {seeds[0]}-{seeds[-1]})\n")
    print("| strategy | p99 TTFT ms per seed | p99 / " + base + " per seed (geomean) | lower in | p99 / probe per seed (geomean) | scrapes/pod/s | probes/pod/s |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in runs.items():
        ss = [s for s in seeds if s in rs]
        p99 = [rs[s]["ttft_ms"]["p99"] for s in ss]
        rat = [rs[s]["ttft_ms"]["p99"] / runs[base][s]["ttft_ms"]["p99"] for s in ss]
        gm = math.exp(sum(map(math.log, rat)) / len(rat))
        rp = [rs[s]["ttft_ms"]["p99"] / runs["probe"][s]["ttft_ms"]["p99"] for s in ss if s in runs.get("probe", {})]
        gp = math.exp(sum(map(math.log, rp)) / len(rp)) if rp else float("nan")
        lower = sum(r < 1 for r in rat)
        sc = sum(rs[s]["pod_scrapes_per_s"] for s in ss) / len(ss)
        pr = sum(rs[s]["pod_probes_per_s"] for s in ss) / len(ss)
        p99s = " / ".join(f"{x:,.0f}" for x in p99) if len(p99) <= 3 else f"{min(p99):,.0f}..{max(p99):,.0f} (median {sorted(p99)[len(p99)//2]:,.0f})"
        print(f"| {name} | {p99s} | {gm:.3f} | {lower}/{len(ss)} | {gp:.3f} | {sc:.1f} | {pr:.1f} |")
