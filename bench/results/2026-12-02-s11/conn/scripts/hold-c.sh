#!/bin/bash
# hold-c.sh ROUNDS: pg-old (main) vs pg-ka (keep-alive on the listener) vs pg-da (+TCP_DEFER_ACCEPT), alternated (order rotates per round): wrk -t2 -c64 4 s, Connection: close and keep-alive; nginx close once per round
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/conn11/ng -e /tmp/conn11/ng/logs/error.log -c /tmp/conn11/nginx.conf"
bins=(old ka da)
for i in $(seq ${1:-3}); do
r=$(( (i-1) % 3 )); order=("${bins[@]:$r}" "${bins[@]:0:$r}")
for b in "${order[@]}"; do CLOSE=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b -config /tmp/conn11/cfg-least_inflight.yaml; done
for b in "${order[@]}"; do ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b -config /tmp/conn11/cfg-least_inflight.yaml; done
CLOSE=1 ./cnt3.sh ng 4 64 -- $NG
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
