#!/usr/bin/env python3
"""compare.py LIVEDIR... : the live bimodal/onoff cells against fleetsim's verdict.

For each live cell (a results.json from scripts/hold.sh), prints every policy's pooled
p50/p99 TTFT, per-seed p99, errors and probes per request, then probe's ratios to the best
blind policy (lowest pooled p99 of round_robin, random, least_inflight) and to cached, with
fleetsim's loss rule (worse in every seed and > 5% pooled). Then fleetsim's figures for the
same cell: fs_big* (30 seeds x 800 requests: the simulator's own verdict) and fs_live*/s*
(30 disjoint 3-seed triples at the live run's size, ~222 requests a seed: how far a 3-seed
live-sized ratio strays from it). Environment: FS (default /tmp/chat) holds fs_big, fs_live.
"""
import glob, json, os, sys

BLIND = ("round_robin", "random", "least_inflight")
FS = os.environ.get("FS", "/tmp/chat")


def live(path):
    r = json.load(open(os.path.join(path, "results.json")))
    sc = r["scenarios"][0]
    p = sc["params"]
    fleet = p.get("fleet", "homo")
    arr = "onoff" if str(p.get("arrivals", "")).startswith("onoff") else "poisson"
    cell = "bimodal/%s/%s/long/n%d/r%d/load85" % (arr, fleet, p["servers"], p["replicas"])
    runs = {s["name"]: s for s in sc["strategies"]}
    return cell, runs, r["fleet"]["capacity_rps"], p["offered_rps"]


def verdict(a, b, ap, bp):
    worse = sum(1 for x, y in zip(ap, bp) if x > y)
    ratio = a / b
    tag = " LOSS" if worse == len(ap) and ratio > 1.05 else (" win" if worse == 0 and ratio < 1 / 1.05 else "")
    return "%.3f (%d/%d worse)%s" % (ratio, worse, len(ap), tag)


def fs_ratios(cells, name):
    c = cells.get(name)
    if not c:
        return None
    runs = {s["name"]: s for s in c["strategies"]}
    pr = runs["probe"]
    bb = min((runs[b] for b in BLIND if b in runs), key=lambda s: s["ttft_p99_ms"])
    return pr["ttft_p99_ms"] / bb["ttft_p99_ms"], pr["ttft_p99_ms"] / runs["cached"]["ttft_p99_ms"], bb["name"], runs


def load(path):
    try:
        return {c["name"]: c for c in json.load(open(path))}
    except FileNotFoundError:
        return {}


big = {}
for p in glob.glob(os.path.join(FS, "fs_big*/general.json")):
    big.update(load(p))
trip = []
for sd in sorted({os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(FS, "fs_live*/s*/general.json"))}):
    t = {}
    for p in glob.glob(os.path.join(FS, "fs_live*", sd, "general.json")):
        t.update(load(p))
    trip.append(t)

for d in sys.argv[1:]:
    cell, runs, cap, offered = live(d)
    print("## %s (live: %s, capacity %.1f req/s, offered %.2f req/s)\n" % (cell, d, cap, offered))
    print("| policy | requests | errors | TTFT p50 | p99 | p99 by seed | probes/req |")
    print("|---|---|---|---|---|---|---|")
    for n, s in runs.items():
        print("| %s | %d | %d | %.0f | **%.0f** | %s | %.2f |" % (n, s["requests"], s["errors"], s["ttft_ms"]["p50"], s["ttft_ms"]["p99"],
              ", ".join("%.0f" % x for x in s["ttft_p99_by_seed"]), s["probes_per_request"]))
    pr = runs["probe"]
    bb = min((runs[b] for b in BLIND if b in runs), key=lambda s: s["ttft_ms"]["p99"])
    ca = runs["cached"]
    print()
    print("live: probe/best blind (%s) p99 %s, p50 %.3f; probe/cached p99 %s, p50 %.3f; probe/oracle p99 %.3f" % (
        bb["name"], verdict(pr["ttft_ms"]["p99"], bb["ttft_ms"]["p99"], pr["ttft_p99_by_seed"], bb["ttft_p99_by_seed"]),
        pr["ttft_ms"]["p50"] / bb["ttft_ms"]["p50"],
        verdict(pr["ttft_ms"]["p99"], ca["ttft_ms"]["p99"], pr["ttft_p99_by_seed"], ca["ttft_p99_by_seed"]),
        pr["ttft_ms"]["p50"] / ca["ttft_ms"]["p50"], pr["ttft_ms"]["p99"] / runs["oracle"]["ttft_ms"]["p99"] if "oracle" in runs else float("nan")))
    f = fs_ratios(big, cell)
    if f:
        fr = f[3]
        print("fleetsim, 30 seeds x 800 requests: probe/best blind (%s) p99 %.3f, probe/cached p99 %.3f; p99 ms %s" % (
            f[2], f[0], f[1], ", ".join("%s %.0f" % (n, s["ttft_p99_ms"]) for n, s in fr.items())))
    ts = [fs_ratios(t, cell) for t in trip]
    ts = [t for t in ts if t]
    if ts:
        for k, lab in ((0, "best blind"), (1, "cached")):
            xs = sorted(t[k] for t in ts)
            n = len(xs)
            lv = (pr["ttft_ms"]["p99"] / (bb if k == 0 else ca)["ttft_ms"]["p99"])
            below = sum(1 for x in xs if x < lv)
            print("fleetsim, %d live-sized 3-seed triples: probe/%s p99 median %.3f, range %.3f..%.3f, 10-90%% %.3f..%.3f; the live ratio %.3f is above %d of %d" % (
                n, lab, xs[n // 2], xs[0], xs[-1], xs[n // 10], xs[(9 * n) // 10 - 1], lv, below, n))
    print()

# Per seed, over every hold given for a cell: probe's p99 over each rival's in the same seed.
import math
bycell = {}
for d in sys.argv[1:]:
    cell, runs, _, _ = live(d)
    bycell.setdefault(cell, []).append(runs)
for cell, holds in bycell.items():
    if len(holds) < 2:
        continue
    print("## %s: per seed over %d holds\n" % (cell, len(holds)))
    for rival in ("round_robin", "least_inflight", "cached", "oracle"):
        rs = []
        for runs in holds:
            if rival in runs:
                rs += [a / b for a, b in zip(runs["probe"]["ttft_p99_by_seed"], runs[rival]["ttft_p99_by_seed"])]
        if rs:
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            print("- probe/%s p99: %s; geomean %.3f, probe worse in %d of %d seeds" % (
                rival, ", ".join("%.2f" % x for x in rs), gm, sum(1 for x in rs if x > 1), len(rs)))
    pps = [runs["probe"]["probes_per_request"] for runs in holds]
    errs = sum(s["errors"] for runs in holds for s in runs.values())
    print("- probes per request %s; errors (every policy) %d\n" % (", ".join("%.2f" % x for x in pps), errs))
