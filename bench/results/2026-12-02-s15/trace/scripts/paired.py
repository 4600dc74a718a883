# usage: paired.py A B HOLDDIR...: per seed (HOLD/s<seed>/results.json, one seed and one entry per
# invocation, both arms run on the same requests), the ratio A/B of p99 TTFT (and p90, p50, mean), then
# over all seeds: geomean of the ratios, count lower, a two-sided exact sign test, and a 10,000-draw
# bootstrap 95% interval of the geomean (seeds resampled), the sd of the log ratios; errors and probes/request per arm
import json, sys, math, os, glob, random
a, b = sys.argv[1], sys.argv[2]
rows = []
for h in sys.argv[3:]:
    for d in sorted(glob.glob(os.path.join(h, 's*/results.json')), key=lambda p: int(p.split('/')[-2][1:])):
        r = json.load(open(d))
        sc = r['scenarios'][0]
        st = {s['name']: s for s in sc['strategies']}
        if a not in st or b not in st:
            continue
        rows.append((h, r['seeds'][0], sc['name'], st[a], st[b], sc['params'].get('trace_rows_per_seed', sc['params'].get('offered_rps'))))
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs))
def sign_p(k, n):
    m = min(k, n - k)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n)
def boot(xs, n=10000):
    rnd = random.Random(1)
    g = sorted(gm([rnd.choice(xs) for _ in xs]) for _ in range(n))
    return g[int(0.025 * n)], g[int(0.975 * n) - 1]
print('hold seed entry rows|rps  %s p99  %s p99  ratio  (p90 ratio, p50 ratio, mean ratio)  errors  probes/req' % (a, b))
stats = {'p99': [], 'p90': [], 'p50': [], 'mean': []}
for h, seed, name, x, y, n in rows:
    for k in stats:
        stats[k].append(x['ttft_ms'][k] / y['ttft_ms'][k])
    print('%s %d %s %s  %.0f  %.0f  %.3f  (%.3f, %.3f, %.3f)  %d/%d  %.2f/%.2f' % (os.path.basename(h), seed, name, n, x['ttft_ms']['p99'], y['ttft_ms']['p99'], stats['p99'][-1], stats['p90'][-1], stats['p50'][-1], stats['mean'][-1], x['errors'], y['errors'], x.get('probes_per_request', 0), y.get('probes_per_request', 0)))
for k, xs in stats.items():
    if not xs:
        continue
    lo, hi = boot(xs)
    low = sum(v < 1 for v in xs)
    ties = sum(v == 1 for v in xs)
    ls = [math.log(v) for v in xs]
    sd = (sum((v - sum(ls) / len(ls)) ** 2 for v in ls) / max(len(ls) - 1, 1)) ** 0.5
    print('%s/%s %s per seed: geomean %.3f, lower in %d of %d (%d ties), sign test p = %.3f, bootstrap 95%% [%.3f, %.3f], sd of log ratio %.3f' % (a, b, k, gm(xs), low, len(xs), ties, sign_p(low, len(xs) - ties), lo, hi, sd))
