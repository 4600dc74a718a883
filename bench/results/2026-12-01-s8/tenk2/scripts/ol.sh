#!/bin/bash
# ol.sh BIN POLICY RATE DUR [PROF_OUT]
# Starts two raw epoll upstreams (the bench's), one probegate (the bench's config), offers
# RATE req/s for DUR with the bench's openloop generator, prints probegate CPU us/req,
# probes / coalesced / skip outcomes per request, and the generator's JSON.
set -e
BIN=$1; POL=$2; RATE=$3; DUR=$4; PROF=$5
D=/tmp/tk2/run/$$; mkdir -p $D
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
U1=127.0.0.1:$(port); U2=127.0.0.1:$(port); P=127.0.0.1:$(port); A=127.0.0.1:$(port)
PROBEGATE_BENCH_RAW_UPSTREAM=$U1 /tmp/tk2/bench >$D/u1.log 2>&1 & UP1=$!
PROBEGATE_BENCH_RAW_UPSTREAM=$U2 /tmp/tk2/bench >$D/u2.log 2>&1 & UP2=$!
cat > $D/pg.yaml <<Y
server:
  listen: "$P"
  admin_listen: "$A"
backends:
  static: ["http://$U1", "http://$U2"]
upstream:
  max_conns_per_backend: 20000
route:
  policy: $POL
  d: 2
log:
  level: error
  access: false
${PGEXTRA}
Y
$BIN -config $D/pg.yaml >$D/pg.log 2>&1 & PG=$!
for i in $(seq 50); do curl -s -o /dev/null http://$A/metrics && break; sleep 0.1; done
sleep 0.3
# warm-up
/tmp/tk2/openloop -rate 2000 -duration 1s http://$P/v1/completions >/dev/null
curl -s http://$A/metrics | grep -E '^probegate_(probes_total|requests_total)' > $D/m0
c0=$(awk '{print $14+$15}' /proc/$PG/stat)
if [ -n "$PROF" ]; then secs=${DUR%s}; curl -s -o $PROF "http://$A/debug/pprof/profile?seconds=$secs" & CP=$!; fi
/tmp/tk2/openloop -rate $RATE -duration $DUR http://$P/v1/completions > $D/ol.json
c1=$(awk '{print $14+$15}' /proc/$PG/stat)
[ -n "$PROF" ] && wait $CP
curl -s http://$A/metrics | grep -E '^probegate_(probes_total|requests_total)' > $D/m1
kill $PG $UP1 $UP2; wait $PG $UP1 $UP2 2>/dev/null || true
python3 - "$D" "$c0" "$c1" "$POL" "$RATE" "$BIN" <<'PY'
import sys,json,re
d,c0,c1,pol,rate,bin=sys.argv[1:]
def rd(f):
    m={}
    for l in open(f):
        k,v=l.rsplit(' ',1); m[k]=float(v)
    return m
m0,m1=rd(d+'/m0'),rd(d+'/m1')
dl={k:m1[k]-m0.get(k,0) for k in m1}
req=sum(v for k,v in dl.items() if k.startswith('probegate_requests_total'))
out={}
for k,v in dl.items():
    mm=re.search(r'outcome="([^"]+)"',k)
    if k.startswith('probegate_probes_total') and mm: out[mm.group(1)]=round(v/max(req,1),4)
ol=json.load(open(d+'/ol.json'))
cpu=(int(c1)-int(c0))*10000.0/max(req,1)  # ticks (10ms) -> us
print(json.dumps({"tag":__import__("os").environ.get("TAG",""),"bin":bin.split('/')[-1],"policy":pol,"rate":int(rate),"req":req,"cpu_us_req":round(cpu,1),"per_req":out,"gen":ol}))
PY
rm -rf $D
