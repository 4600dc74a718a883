#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3; do
NOPERF=1 ./cnt.sh base9 5 -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
NOPERF=1 ./cnt.sh base9gmp1 5 -- env GOMAXPROCS=1 /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
NOPERF=1 ./cnt.sh nginx 5 -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
