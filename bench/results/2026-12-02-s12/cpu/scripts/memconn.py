#!/usr/bin/env python3
# memconn.py NAME N MODE -- CMD...: start CMD (probegate; API 18080, admin 18081), then open N client
# connections: MODE idle = one request answered on each, then kept open; MODE silent = connected,
# nothing sent. Prints, per connection, the growth of VmRSS and of the Go heap and stacks in use
# (admin /metrics, after a GC forced through /debug/pprof/heap?gc=1), each measured 1 s after the
# last connection opened (WAIT seconds, default 1), against the same figures before the first.
import os, signal, socket, subprocess, sys, time, urllib.request
name, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cmd = sys.argv[sys.argv.index('--') + 1:]
p = subprocess.Popen(cmd, stdout=open('/tmp/cpu12/%s.log' % name, 'w'), stderr=subprocess.STDOUT, start_new_session=True)
body = b'{"model":"m","prompt":"hello","max_tokens":1}'
req = b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(body), body)
def fetch(path):
    return urllib.request.urlopen('http://127.0.0.1:18081' + path, timeout=10).read()
for _ in range(100):
    try:
        s = socket.create_connection(('127.0.0.1', 18080)); s.close(); fetch('/healthz'); break
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
w = socket.create_connection(('127.0.0.1', 18080))
for _ in range(200):
    one(w)
w.close()
def snap():
    fetch('/debug/pprof/heap?gc=1')
    time.sleep(0.2)
    fetch('/debug/pprof/heap?gc=1')
    m = {}
    for l in fetch('/metrics').decode().splitlines():
        for k in ('go_memstats_heap_inuse_bytes', 'go_memstats_stack_inuse_bytes', 'go_goroutines'):
            if l.startswith(k + ' '):
                m[k] = float(l.split()[1])
    rss = [int(l.split()[1]) for l in open('/proc/%d/status' % p.pid) if l.startswith('VmRSS')][0] * 1024
    m['rss'] = rss
    return m
time.sleep(1)
a = snap()
conns = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', 18080))
    if mode == 'idle':
        st = one(s)
        assert st == b'200', st
    conns.append(s)
time.sleep(float(os.environ.get('WAIT', '1')))
b = snap()
d = {k: (b[k] - a[k]) for k in a}
print('%s mode=%s n=%d rss=%.1f KiB/conn heap=%.1f KiB/conn stack=%.1f KiB/conn goroutines=+%d load=%s' % (
    name, mode, n, d['rss'] / 1024 / n, d['go_memstats_heap_inuse_bytes'] / 1024 / n,
    d['go_memstats_stack_inuse_bytes'] / 1024 / n, d['go_goroutines'], open('/proc/loadavg').read().split()[0]), flush=True)
for s in conns:
    s.close()
os.killpg(p.pid, signal.SIGTERM)
try:
    p.wait(5)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL); p.wait()
time.sleep(0.3)
