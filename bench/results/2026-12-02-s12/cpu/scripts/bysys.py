import sys, re, collections
# perf script output: aggregate samples per request by the system call (or user) they fall in
n = int(open(sys.argv[2]).read())
hz = 2999
agg = collections.Counter()
cur = []
def flush():
    if not cur: return
    frames = [f for f in cur]
    kernel = frames[0][1] == 'k'
    tag = None
    for sym, _ in frames:
        m = re.match(r'(__x64_sys_|__do_sys_|ksys_)(\w+)', sym)
        if m:
            tag = 'sys:' + m.group(2); break
        if sym in ('do_syscall_64',):
            tag = 'sys:?'; break
    if tag is None:
        if kernel:
            tag = 'kernel-other:' + next((s for s, _ in frames if 'irq' in s or 'softirq' in s or 'exit_to_user' in s or 'schedule' in s), frames[0][0])
        else:
            s = frames[0][0]
            if s.startswith('runtime.') or s.startswith('internal/runtime'): tag = 'user:runtime'
            elif 'fasthttp' in s: tag = 'user:fasthttp'
            elif 'probegate' in s: tag = 'user:probegate'
            else: tag = 'user:other'
    agg[tag] += 1
for line in open(sys.argv[1], errors='replace'):
    line = line.rstrip('\n')
    if not line.strip():
        flush(); cur = []; continue
    if line[0] not in ' \t':
        continue
    parts = line.strip().split(None, 1)
    if len(parts) < 2: continue
    sym = parts[1]
    k = 'k' if sym.endswith('([kernel.kallsyms])') else 'u'
    sym = re.sub(r'\+0x[0-9a-f]+', '', sym.split(' (')[0])
    cur.append((sym, k))
flush()
tot = sum(agg.values())
print('total us/req %.1f' % (tot / n / hz * 1e6))
for k, v in agg.most_common(25):
    print('%-45s %6.2f us/req' % (k, v / n / hz * 1e6))
