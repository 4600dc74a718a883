#!/usr/bin/env python3
"""Medians per benchmark and metric of two bfwd.sh outputs (old, new), in
run order, with new/old ratios of the medians and per pair.
usage: summ.py OLD.txt NEW.txt"""
import re, statistics, sys
from collections import defaultdict

def load(path):
    runs = defaultdict(lambda: defaultdict(list))
    for line in open(path):
        if not line.startswith('Benchmark'):
            continue
        f = line.split()
        name = re.sub(r'-\d+$', '', f[0])
        for i in range(2, len(f) - 1, 2):
            runs[name][f[i + 1]].append(float(f[i]))
    return runs

old, new = load(sys.argv[1]), load(sys.argv[2])
for name in old:
    for unit in old[name]:
        o, n = old[name][unit], new[name].get(unit, [])
        if not n:
            continue
        mo, mn = statistics.median(o), statistics.median(n)
        pairs = ' '.join('%.2f' % (b / a) if a else '-' for a, b in zip(o, n))
        r = '%.2f' % (mn / mo) if mo else '-'
        print(f'{name:50s} {unit:10s} old {mo:12.2f} new {mn:12.2f} ratio {r} (pairs {pairs})')
