#!/usr/bin/env python3
# usage: summary.py BASE OTHER upload.tsv   (upload.go's output)
# Per cell (backend mode, body size): medians over rounds of CPU per request
# and latency p50 for BASE and OTHER, OTHER/BASE ratios, and in how many
# rounds OTHER's CPU per request was above BASE's.
import sys, statistics as st, collections
base, other, path = sys.argv[1:4]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l[0].isdigit()]
cpu = collections.defaultdict(dict); lat = collections.defaultdict(dict); gcs = collections.defaultdict(dict)
for row in rows:
    r, b, mode, size, n, c, p50 = row[:7]
    cpu[(mode, size)].setdefault(b, {})[r] = float(c)
    lat[(mode, size)].setdefault(b, {})[r] = float(p50)
    if len(row) > 9:
        gcs[(mode, size)].setdefault(b, {})[r] = float(row[9])
print("mode\tsize\tcpu_us_req_%s\tcpu_us_req_%s\tratio\trounds_%s_above\tlat_p50_ms_%s\tlat_p50_ms_%s\tratio\tgcs_req_%s\tgcs_req_%s" % (base, other, other, base, other, base, other))
for key in cpu:
    cb, co = cpu[key][base], cpu[key][other]
    lb, lo = lat[key][base], lat[key][other]
    above = sum(1 for r in cb if r in co and co[r] > cb[r])
    mb, mo = st.median(cb.values()), st.median(co.values())
    nb, no = st.median(lb.values()), st.median(lo.values())
    g = gcs.get(key, {})
    gb = "%.2f" % st.median(g[base].values()) if base in g else "-"
    go = "%.2f" % st.median(g[other].values()) if other in g else "-"
    print("%s\t%s\t%.1f\t%.1f\t%.3f\t%d/%d\t%.2f\t%.2f\t%.3f\t%s\t%s" % (key[0], key[1], mb, mo, mo / mb, above, len(cb), nb, no, no / nb, gb, go))
