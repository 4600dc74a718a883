#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
REP=3 ./ol.sh olbase9 1500 4s -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
REP=3 ./ol.sh olnginx 1500 4s -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
