#!/bin/bash
# hold-b.sh ROUNDS: pg-old (main) vs pg-ka (route.Listen), alternated: wrk -c64 4 s, Connection: close and keep-alive; nginx once per round for reference; then syscalls per request (perf stat) for each under close
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/conn11/ng -e /tmp/conn11/ng/logs/error.log -c /tmp/conn11/nginx.conf"
for i in $(seq ${1:-3}); do
for b in old ka; do CLOSE=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b -config /tmp/conn11/cfg-least_inflight.yaml; done
for b in ka old; do ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b -config /tmp/conn11/cfg-least_inflight.yaml; done
CLOSE=1 ./cnt3.sh ng 4 64 -- $NG
done
for b in old ka; do SYSC=1 CLOSE=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b -config /tmp/conn11/cfg-least_inflight.yaml; done
SYSC=1 CLOSE=1 ./cnt3.sh ng 4 64 -- $NG
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
