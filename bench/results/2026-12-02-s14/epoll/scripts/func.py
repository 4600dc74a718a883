#!/usr/bin/env python3
"""func.py SPIKE_BINARY: functional checks of the spike against scripted upstreams (not timing).

1. keep-alive: 3 requests on one client connection are answered in order.
2. stray bytes: upstream A answers with 5 bytes after its Content-Length body; the spike must not reuse
   that connection (the next request reaches A on a new connection, and its answer is clean).
3. client disconnect: upstream B holds its answer 1.5 s; the client closes after 0.3 s; the spike must
   close its upstream connection (B sees EOF before it answers).
4. hostile limits: a 20 KiB head gets 431, a 2 MiB body 413, chunked 501.
"""
import socket, subprocess, sys, threading, time

ANS = b'{"ok":1}'
def resp(extra=b''):
    return b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s%s' % (len(ANS), ANS, extra)

events = []
def upstream(port, mode):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', port)); ls.listen(16)
    def serve(c, n):
        buf = b''
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                d = b''
            if not d:
                events.append((port, n, 'eof')); return
            buf += d
            while b'\r\n\r\n' in buf:
                head, _, buf = buf.partition(b'\r\n\r\n')
                events.append((port, n, head.split(b'\r\n')[0].decode()))
                if b'/slow' in head:
                    c.settimeout(1.5)
                    try:
                        d = c.recv(1)
                        events.append((port, n, 'eof-while-slow' if not d else 'data-while-slow')); return
                    except socket.timeout:
                        c.settimeout(None)
                c.sendall(resp(b'STRAY' if b'/stray' in head else b''))
    n = 0
    while True:
        c, _ = ls.accept(); n += 1
        threading.Thread(target=serve, args=(c, n), daemon=True).start()

def ask(s, path, body=b'{}', extra=b''):
    s.sendall(b'POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s' % (path, extra, len(body), body))
    data = b''
    while b'\r\n\r\n' not in data:
        data += s.recv(65536)
    head, _, rest = data.partition(b'\r\n\r\n')
    n = int([l.split(b':')[1] for l in head.split(b'\r\n') if l.lower().startswith(b'content-length')][0])
    while len(rest) < n:
        rest += s.recv(65536)
    return head.split(b'\r\n')[0].decode(), rest

def main():
    threading.Thread(target=upstream, args=(18401, 'a'), daemon=True).start()
    time.sleep(0.2)
    sp = subprocess.Popen([sys.argv[1], '-listen', '127.0.0.1:18400', '-upstreams', '127.0.0.1:18401', '-loops', '1'] + sys.argv[2:])
    time.sleep(0.3)
    ok = True
    def check(cond, what):
        nonlocal ok
        print(('ok   ' if cond else 'FAIL ') + what); ok &= bool(cond)
    try:
        s = socket.create_connection(('127.0.0.1', 18400))
        r = [ask(s, b'/v1/completions') for _ in range(3)]
        check(all(x == ('HTTP/1.1 200 OK', ANS) for x in r), '3 keep-alive exchanges answered in order')
        conns_before = len({n for p, n, e in events})
        st, body = ask(s, b'/stray')
        check((st, body) == ('HTTP/1.1 200 OK', ANS), 'stray: the answer is cut at its Content-Length')
        st, body = ask(s, b'/v1/completions')
        time.sleep(0.1)
        conns_after = len({n for p, n, e in events})
        check((st, body) == ('HTTP/1.1 200 OK', ANS), 'after stray: next answer clean')
        check(conns_after == conns_before + 1, f'after stray: a new upstream connection (upstream connections {conns_before} -> {conns_after})')
        c = socket.create_connection(('127.0.0.1', 18400))
        c.sendall(b'POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}')
        time.sleep(0.3); c.close(); time.sleep(0.5)
        check(any(e == 'eof-while-slow' for p, n, e in events), 'client disconnect closed the upstream connection before its answer')
        for what, req, want in (
            ('20 KiB head', b'GET / HTTP/1.1\r\nX-Big: ' + b'a' * 20000 + b'\r\n\r\n', b'431'),
            ('2 MiB body', b'POST / HTTP/1.1\r\nContent-Length: 2097152\r\n\r\n', b'413'),
            ('chunked', b'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', b'501')):
            c = socket.create_connection(('127.0.0.1', 18400)); c.sendall(req)
            got = c.recv(4096); c.close()
            check(got.split(b' ')[1:2] == [want] and b'"error":{' in got, f'{what}: {want.decode()} with the error envelope')
        st, body = ask(s, b'/v1/completions')
        check(st == 'HTTP/1.1 200 OK', 'the first client is still served')
    finally:
        sp.terminate(); sp.wait()
    print('events:', events)
    sys.exit(0 if ok else 1)

main()
