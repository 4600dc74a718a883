#!/bin/bash
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/tk3/ng -e /tmp/tk3/ng/logs/error.log -c /tmp/tk3/ng/nginx.conf"
for i in 1 2; do
for c in 64 512; do
./cnt2.sh li 4 $c -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
./cnt2.sh ng 4 $c -- $NG
done
CLOSE=1 ./cnt2.sh li 4 64 -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
CLOSE=1 ./cnt2.sh ng 4 64 -- $NG
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
