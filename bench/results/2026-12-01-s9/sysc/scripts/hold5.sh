#!/bin/bash
cd /tmp/sc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
./trace.sh tbase9 3 -- /tmp/probegate-base9 -config /tmp/sc/cfg.yaml
./trace.sh tnginx 3 -- nginx -p /tmp/sc/ng -e /tmp/sc/ng/logs/error.log -c /tmp/sc/ng/nginx.conf
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
