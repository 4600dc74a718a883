#!/bin/bash
# hold-c.sh: perf record (kernel and user stacks) of probegate (base), nginx and minproxy under wrk -t2 -c64 3 s
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
./cnt5.sh base-rec 3 64 -- /tmp/probegate-base12 $CFG
./cnt5.sh nginx-rec 3 64 -- nginx -p /tmp/cpu12/ng -c /tmp/cpu12/nginx.conf
./cnt5.sh min-rec 3 64 -- /tmp/cpu12/minproxy
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
