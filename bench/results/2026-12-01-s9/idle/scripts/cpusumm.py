#!/usr/bin/env python3
"""Median CPU seconds (user+sys) and wall per benchmark of two bcpu.sh
outputs, with new/old ratios (of the medians and per pair).
usage: cpusumm.py OLD-cpu.txt NEW-cpu.txt"""
import statistics, sys
from collections import defaultdict

def load(path):
    d = defaultdict(lambda: defaultdict(list))
    for line in open(path):
        f = line.split()
        if len(f) < 8 or f[2] != 'wall':
            continue
        d[f[0]]['cpu'].append(float(f[5]) + float(f[7]))
        d[f[0]]['user'].append(float(f[5]))
        d[f[0]]['wall'].append(float(f[3]))
    return d

old, new = load(sys.argv[1]), load(sys.argv[2])
for name in old:
    for k in ('cpu', 'user', 'wall'):
        o, n = old[name][k], new[name][k]
        mo, mn = statistics.median(o), statistics.median(n)
        pairs = ' '.join('%.2f' % (b / a) for a, b in zip(o, n))
        print(f'{name:5s} {k:5s} old {mo:6.2f} s new {mn:6.2f} s ratio {mn/mo:.2f} (pairs {pairs})')
