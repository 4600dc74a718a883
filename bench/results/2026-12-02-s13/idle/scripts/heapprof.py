#!/usr/bin/env python3
# heapprof.py: with /tmp/idle13/pg-new1 -config cfg-prof.yaml serving (18380, admin 18381; ./up2.sh start),
# save a heap profile, open 2,000 connections with one request each, wait 4 s (released), save another.
# Then: go tool pprof -sample_index=inuse_space -base out/heap0.pb.gz -top -nodecount=25 /tmp/idle13/pg-new1 out/heap1.pb.gz
import socket, time, urllib.request
req = b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'
def fetch(p): return urllib.request.urlopen('http://127.0.0.1:18381' + p, timeout=20).read()
for _ in range(200):
    try:
        s = socket.create_connection(('127.0.0.1', 18380)); s.sendall(req); r = s.recv(1000); s.close()
        if b' 200 ' in r: break
    except Exception: pass
    time.sleep(0.1)
fetch('/debug/pprof/heap?gc=1')
open('/tmp/idle13/out/heap0.pb.gz', 'wb').write(fetch('/debug/pprof/heap?gc=1'))
cs = []
for i in range(2000):
    s = socket.create_connection(('127.0.0.1', 18380)); s.sendall(req)
    b = b''
    while b'\r\n\r\n' not in b: b += s.recv(4096)
    cs.append(s)
time.sleep(4)
fetch('/debug/pprof/heap?gc=1')
open('/tmp/idle13/out/heap1.pb.gz', 'wb').write(fetch('/debug/pprof/heap?gc=1'))
