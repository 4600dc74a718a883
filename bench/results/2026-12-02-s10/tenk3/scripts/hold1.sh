#!/bin/bash
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/tk3/ng -e /tmp/tk3/ng/logs/error.log -c /tmp/tk3/ng/nginx.conf"
for i in 1 2 3 4 5; do
./ol2.sh probe 10000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-probe.yaml
./ol2.sh least 10000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
./ol2.sh nginx 10000 4s -- $NG
done
for i in 1 2 3; do
MW=64 ./ol2.sh probe 10000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-probe.yaml
MW=64 ./ol2.sh least 10000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
MW=64 ./ol2.sh nginx 10000 4s -- $NG
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
