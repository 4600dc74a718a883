#!/usr/bin/env python3
# memwarm.py NAME N WARMC -- CMD...: start CMD (probegate; API 18180, admin 18181), warm it (wrk -t2
# -cWARMC, repeated 2 s runs until >= WARMN (default 50000) requests were served), close those
# connections and wait 3 s, then open N client connections with one request answered on each, kept
# open (MODE=stream: a short SSE stream, then that request, on each). Prints per connection the growth of VmRSS and of the Go runtime's memory (admin /metrics,
# after a GC forced through /debug/pprof/heap?gc=1) WAIT1 (default 3) s and WAIT2 (default 25) s after
# the last connection opened, against the same figures just before the first; and the goroutines by
# what they wait in (/debug/pprof/goroutine?debug=1).
import os, re, signal, socket, subprocess, sys, time, urllib.request
name, n, warmc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cmd = sys.argv[sys.argv.index('--') + 1:]
p = subprocess.Popen(cmd, stdout=open('/tmp/idle13/out/%s.log' % name, 'w'), stderr=subprocess.STDOUT, start_new_session=True)
body = b'{"model":"m","prompt":"hello","max_tokens":1}'
req = b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(body), body)
def fetch(path):
    return urllib.request.urlopen('http://127.0.0.1:18181' + path, timeout=20).read()
for _ in range(100):
    try:
        s = socket.create_connection(('127.0.0.1', 18180)); s.close(); fetch('/healthz'); break
    except Exception:
        time.sleep(0.1)
def one(s):
    s.sendall(req)
    buf = b''
    while b'\r\n\r\n' not in buf:
        buf += s.recv(65536)
    head, rest = buf.split(b'\r\n\r\n', 1)
    cl = [int(l.split(b':')[1]) for l in head.split(b'\r\n') if l.lower().startswith(b'content-length')][0]
    while len(rest) < cl:
        rest += s.recv(65536)
    return head.split(b' ')[1]
sbody = b'{"model":"m","prompt":"hello","max_tokens":2,"stream":true}'
sreq = b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(sbody), sbody)
def stream(s):
    s.sendall(sreq)
    buf = b''
    while not buf.endswith(b'\r\n0\r\n\r\n'):
        r = s.recv(65536)
        assert r, buf
        buf += r
    assert b'text/event-stream' in buf and b'[DONE]' in buf and b'chunked' in buf.lower(), buf
    return buf.split(b' ')[1]
MODE = os.environ.get('MODE', 'plain')
for _ in range(300):  # serving: the backends are added (the proxy may answer /healthz before)
    s = socket.create_connection(('127.0.0.1', 18180))
    ok = one(s) == b'200'
    s.close()
    if ok:
        break
    time.sleep(0.1)
warmed = 0
while warmed < int(os.environ.get('WARMN', '50000')):
    out = subprocess.run(['wrk', '-t2', '-c%d' % warmc, '-d2s', '-s', '/tmp/idle13/post.lua',
                          'http://127.0.0.1:18180/v1/completions'], capture_output=True, text=True).stdout
    m = re.search(r'(\d+) requests in', out)
    warmed += int(m.group(1)) if m else 0
    if re.search(r'Non-2xx', out):
        print('warm-up: non-2xx answers', out, file=sys.stderr)
        print(fetch('/metrics').decode().count('\n'), [l for l in fetch('/metrics').decode().splitlines() if l.startswith('probegate_requests_total')], file=sys.stderr)
time.sleep(float(os.environ.get('WAITA', '22')))  # past fasthttp's idle-worker cleaner (10-20 s): the warm-up's workers gone
KEYS = ('heap_sys', 'heap_inuse', 'heap_idle', 'heap_released', 'stack_inuse', 'stack_sys', 'mspan_inuse', 'other_sys', 'gc_sys', 'sys')
def snap():
    pre = [l for l in fetch('/metrics').decode().splitlines() if l.startswith('go_memstats_stack_inuse_bytes ')]
    fetch('/debug/pprof/heap?gc=1')
    time.sleep(0.2)
    fetch('/debug/pprof/heap?gc=1')
    m = {}
    for l in fetch('/metrics').decode().splitlines():
        for k in KEYS:
            if l.startswith('go_memstats_%s_bytes ' % k):
                m[k] = float(l.split()[1])
        if l.startswith('go_goroutines '):
            m['goroutines'] = float(l.split()[1])
    m['stack_nogc'] = float(pre[0].split()[1])  # before the forced GCs, which shrink stacks
    m['retained'] = m['heap_idle'] - m['heap_released']  # free heap pages still resident
    m['resident_go'] = m['sys'] - m['heap_released']  # what the runtime holds mapped and not returned
    st = {l.split(':')[0]: int(l.split()[1]) for l in open('/proc/%d/status' % p.pid) if l.startswith(('VmRSS', 'RssAnon'))}
    m['rss'], m['anon'] = st['VmRSS'] * 1024, st['RssAnon'] * 1024
    g = fetch('/debug/pprof/goroutine?debug=1').decode()
    blocks = []
    for b in g.split('\n\n'):
        mm = re.search(r'^(\d+) @', b, re.M)
        if mm:
            blocks.append((int(mm.group(1)), b))
    m['g_release'] = sum(c for c, b in blocks if 'releaseIdle' in b)
    m['g_worker_idle'] = sum(c for c, b in blocks if 'workerFunc' in b and 'serveConn' not in b)
    m['g_serving'] = sum(c for c, b in blocks if 'serveConn' in b)
    m['g_stream_wait'] = sum(c for c, b in blocks if 'afterStream' in b)
    return m
a = snap()
conns = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', 18180))
    if MODE == 'stream':
        assert stream(s) == b'200'
    st = one(s)
    assert st == b'200', st
    conns.append(s)
t0 = time.time()
res = []
for w in (float(os.environ.get('WAIT1', '3')), float(os.environ.get('WAIT2', '25'))):
    time.sleep(max(0, t0 + w - time.time()))
    b = snap()
    d = {k: (b[k] - a[k]) / n / 1024 for k in a}
    print('%s mode=%s n=%d warm=%d/c%d t=%gs rss=%.1f go_resident=%.1f heap_inuse=%.1f retained_free=%.1f stack_inuse=%.1f (before GC %.1f) mspan=%.2f other=%.2f KiB/conn'
          ' | abs rss %.1f MiB heap_inuse %.1f MiB | goroutines +%d (release waiters %d, idle workers %d, serving %d, after-stream waits %d) load=%s' % (
        name, MODE, n, warmed, warmc, w, d['rss'], d['resident_go'], d['heap_inuse'], d['retained'], d['stack_inuse'], d['stack_nogc'], d['mspan_inuse'], d['other_sys'],
        b['rss'] / 2**20, b['heap_inuse'] / 2**20, b['goroutines'] - a['goroutines'], b['g_release'], b['g_worker_idle'], b['g_serving'], b['g_stream_wait'],
        open('/proc/loadavg').read().split()[0]), flush=True)
# every connection still served
for s in conns[:50]:
    assert one(s) == b'200'
for s in conns:
    s.close()
os.killpg(p.pid, signal.SIGTERM)
try:
    p.wait(5)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL); p.wait()
time.sleep(0.3)
