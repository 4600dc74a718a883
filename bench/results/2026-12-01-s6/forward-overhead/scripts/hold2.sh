#!/bin/bash
# hold 2: base vs new1 vs nginx, 3 rounds (order rotated), CPU user/total per request; then perf stat each once
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
B="./m.sh base 4 -- /tmp/s6f/pg-base -config /tmp/s6f/cfg.yaml"
N="./m.sh new1 4 -- /tmp/s6f/pg-new1 -config /tmp/s6f/cfg.yaml"
G="./m.sh nginx 4 -- nginx -p /tmp/s6f/ng -c /tmp/s6f/nginx.conf -e /tmp/s6f/ng/error.log"
$B; $N; $G
$N; $G; $B
$G; $B; $N
PERFSTAT=1 ./m.sh base_stat 5 -- /tmp/s6f/pg-base -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh new1_stat 5 -- /tmp/s6f/pg-new1 -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh nginx_stat 5 -- nginx -p /tmp/s6f/ng -c /tmp/s6f/nginx.conf -e /tmp/s6f/ng/error.log
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
