#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2; do
BURST=0.3 ./ol.sh olbase9 3000 4s -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
BURST=0.3 ./ol.sh olnginx 3000 4s -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
