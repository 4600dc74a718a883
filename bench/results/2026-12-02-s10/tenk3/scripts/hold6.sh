#!/bin/bash
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/tk3/ng -e /tmp/tk3/ng/logs/error.log -c /tmp/tk3/ng/nginx.conf"
for i in 1 2 3; do
./cnt3.sh base 6 32 -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
./cnt3.sh lifo 6 32 -- /tmp/tk3/pg-lifo -config /tmp/tk3/cfg-least_inflight.yaml
./cnt3.sh nginx 6 32 -- $NG
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
