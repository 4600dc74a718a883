import socket,time,sys
port=int(sys.argv[1])
s=socket.create_connection(("127.0.0.1",port))
req=b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}'
s.sendall(req*3)
time.sleep(0.05)
t=time.time(); data=b''
s.settimeout(3)
while data.count(b'HTTP/1.1 200')<3:
    d=s.recv(65536)
    if not d: break
    data+=d
print("pipelined 3:", data.count(b'HTTP/1.1 200'), round(time.time()-t,3))
# request, then next request sent in two pieces with a gap
for i in range(3):
    s.sendall(req[:20]); time.sleep(0.01); s.sendall(req[20:])
    d=b''
    while b'}' not in d.split(b'\r\n\r\n',1)[-1] if b'\r\n\r\n' in d else True:
        d+=s.recv(65536)
    print("split ok", d[:15])
# pipelined after a response: send req, then immediately another before reading
s.sendall(req); s.sendall(req)
t=time.time(); data=b''
while data.count(b'HTTP/1.1 200')<2:
    data+=s.recv(65536)
print("back-to-back 2:", round(time.time()-t,3))
