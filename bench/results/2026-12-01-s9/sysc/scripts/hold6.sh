#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2; do
./ol.sh olbase9 10000 4s -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
./ol.sh olbase9gmp1 10000 4s -- env GOMAXPROCS=1 /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
./ol.sh olnginx 10000 4s -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
