#!/bin/bash
# hold-a.sh: baseline. pg-old (main) vs nginx, wrk -c64 4 s, keep-alive and Connection: close, 2 rounds; then a pprof of pg-old under close
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/conn11/ng -e /tmp/conn11/ng/logs/error.log -c /tmp/conn11/nginx.conf"
for i in 1 2; do
./cnt2.sh old 4 64 -- /tmp/conn11/pg-old -config /tmp/conn11/cfg-least_inflight.yaml
./cnt2.sh ng 4 64 -- $NG
CLOSE=1 ./cnt2.sh old 4 64 -- /tmp/conn11/pg-old -config /tmp/conn11/cfg-least_inflight.yaml
CLOSE=1 ./cnt2.sh ng 4 64 -- $NG
done
PROF=old-close CLOSE=1 ./cnt2.sh old 8 64 -- /tmp/conn11/pg-old -config /tmp/conn11/cfg-least_inflight.yaml
PROF=old-ka ./cnt2.sh old 8 64 -- /tmp/conn11/pg-old -config /tmp/conn11/cfg-least_inflight.yaml
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
