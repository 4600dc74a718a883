#!/usr/bin/env python3
"""aa.py ARM "DIR..." "DIR...": the same arm (same code, same requests per seed) in two sets of
holds: per-seed ratio of its p50 and p99 TTFT, geometric mean and range: the live noise floor."""
import json, glob, os, math, sys
def arm(dirs, name):
    out = {}
    for d in dirs.split():
        for f in glob.glob(d + "/s*/results.json"):
            s = int(f.split(os.sep)[-2][1:]); sc = json.load(open(f))["scenarios"][0]
            out[s] = {x["name"]: x for x in sc["strategies"]}[name]["ttft_ms"]
    return out
name, a, b = sys.argv[1], arm(sys.argv[2], sys.argv[1]), arm(sys.argv[3], sys.argv[1])
for q in ("p50", "p99"):
    r = [a[s][q] / b[s][q] for s in sorted(a) if s in b]
    print(f"{name} {q}: geomean {math.exp(sum(map(math.log, r)) / len(r)):.3f}, range {min(r):.3f}..{max(r):.3f}, higher in {sum(x > 1 for x in r)} of {len(r)}")
