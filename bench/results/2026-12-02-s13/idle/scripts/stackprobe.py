#!/usr/bin/env python3
# stackprobe.py N -- CMD...: start CMD (probegate on 18380, admin 18381), warm it (wrk -t2 -c500 until
# >= 50k requests), wait 22 s (fasthttp's idle workers gone), read go_memstats_stack_inuse_bytes and
# go_goroutines without forcing a GC, open N connections with one request each, wait 25 s (released,
# the idle workers gone), read them again without a GC, then after two forced GCs: the stack a release
# waiter starts with (adaptive starting size) and what the GC shrinks it to.
import re, signal, socket, subprocess, sys, time, urllib.request
n = int(sys.argv[1]); cmd = sys.argv[sys.argv.index('--') + 1:]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
req = b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'
def fetch(path): return urllib.request.urlopen('http://127.0.0.1:18381' + path, timeout=20).read()
def one(s):
    s.sendall(req); b = b''
    while b'\r\n\r\n' not in b: b += s.recv(4096)
    return b' 200 ' in b.split(b'\r\n')[0] + b' '
for _ in range(300):
    try:
        s = socket.create_connection(('127.0.0.1', 18380)); ok = one(s); s.close()
        if ok: break
    except Exception: pass
    time.sleep(0.1)
warmed = 0
while warmed < 50000:
    out = subprocess.run(['wrk', '-t2', '-c500', '-d2s', '-s', '/tmp/idle13/post.lua', 'http://127.0.0.1:18380/v1/completions'], capture_output=True, text=True).stdout
    warmed += int(re.search(r'(\d+) requests in', out).group(1))
time.sleep(22)
def get():
    m = {}
    for l in fetch('/metrics').decode().splitlines():
        if l.startswith(('go_memstats_stack_inuse_bytes ', 'go_goroutines ', 'go_gc_duration_seconds_count ')):
            m[l.split()[0]] = float(l.split()[1])
    return m
a = get()
cs = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', 18380)); assert one(s); cs.append(s)
time.sleep(25)
b = get()
fetch('/debug/pprof/heap?gc=1'); fetch('/debug/pprof/heap?gc=1')
c = get()
k, g = 'go_memstats_stack_inuse_bytes', 'go_goroutines'
print('n=%d warm=%d: stack per new goroutine without a forced GC %.2f KiB (+%d goroutines, GCs in between %d), after two forced GCs %.2f KiB' % (
    n, warmed, (b[k] - a[k]) / (b[g] - a[g]) / 1024, b[g] - a[g], b['go_gc_duration_seconds_count'] - a['go_gc_duration_seconds_count'], (c[k] - a[k]) / (c[g] - a[g]) / 1024), flush=True)
for s in cs: s.close()
p.send_signal(signal.SIGTERM); p.wait()
