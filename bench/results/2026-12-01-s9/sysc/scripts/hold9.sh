#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for r in 6000 10000; do for i in 1 2; do
./ol.sh olbase9 $r 4s -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
./ol.sh olnginx $r 4s -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
done; done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
