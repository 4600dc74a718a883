#!/bin/bash
# hold4: nginx vs base10 (least_inflight) at GOMAXPROCS default and 1, 2 rounds, order rotated
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"; ./up.sh start
NG="nginx -p /tmp/c10/ng -e /tmp/c10/ng/logs/error.log -c /tmp/c10/nginx.conf"
for i in 1 2; do
./m2.sh nginx 5 -- $NG
./m2.sh li 5 -- /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml
./m2.sh li_gmp1 5 -- env GOMAXPROCS=1 /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml
done
./up.sh stop; echo "end $(date -u +%T) $(uptime)"
