# usage: offsets.py ROWS SEEDS_PER_HOLD HOLDS: the -trace-offset (seconds) of each hold so that hold h's
# seed windows continue hold h-1's (window k of a hold starts at row first + k*ROWS, first = the first row
# at or after the offset; bench/trace_scenario.go), from the default offset 180 s of the code trace
import sys, datetime
n, per, holds = map(int, sys.argv[1:4])
ts = []
for line in open('/work/shared/traces/azure_code_2023.csv').readlines()[1:]:
    t = datetime.datetime.strptime(line.split(',')[0][:26], '%Y-%m-%d %H:%M:%S.%f')
    ts.append(t)
at = [(t - ts[0]).total_seconds() for t in ts]
first = next(i for i, a in enumerate(at) if a >= 180)
for h in range(holds):
    i = (first + h * per * n) % len(at)
    off = at[i] if i == 0 else (at[i - 1] + at[i]) / 2
    print('hold %d: row %d, -trace-offset %.4fs' % (h, i, off))
