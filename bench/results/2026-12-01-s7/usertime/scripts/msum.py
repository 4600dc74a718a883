import sys, re, statistics as st, collections
# msum.py LOG: m.sh lines "NAME rps=.. cpu_us_per_req=.. usr_us_per_req=.." + perf stat lines; group by binary prefix (before first digit/-h)
rows = []; cur = None
for line in open(sys.argv[1]):
    m = re.match(r'^(\S+) rps=(\S+) p99=(\S+) cpu_us_per_req=(\S+) usr_us_per_req=(\S+) vcs/req=(\S+) ivcs/req=(\S+)', line)
    if m:
        name = m.group(1); b = re.match(r'([a-z]+[0-9]?)(?:-h\d)?-?(\d+)$', name)
        cur = dict(bin=re.sub(r'(-h\d+)?-?\d+$', '', name), rps=float(m.group(2)), cpu=float(m.group(4)), usr=float(m.group(5)), cs=float(m.group(6))+float(m.group(7)))
        rows.append(cur); continue
    m = re.match(r'^\s+raw_syscalls:sys_enter (\S+)/req', line)
    if m and cur: cur['sys'] = float(m.group(1))
bins = sorted(set(r['bin'] for r in rows))
for k in ('rps','cpu','usr','sys','cs'):
    out = []
    for b in bins:
        vs = [r[k] for r in rows if r['bin']==b and k in r]
        out.append(f"{b}: med {st.median(vs):.2f} [{', '.join(f'{v:g}' for v in vs)}]")
    print(k, ' | '.join(out))
a, b = bins[0], bins[1]
A = [r for r in rows if r['bin']==a]; B = [r for r in rows if r['bin']==b]
for k in ('cpu','usr'):
    print(f"{k}: {b} lower than {a} in {sum(1 for x,y in zip(A,B) if y[k]<x[k])}/{min(len(A),len(B))} pairs")
