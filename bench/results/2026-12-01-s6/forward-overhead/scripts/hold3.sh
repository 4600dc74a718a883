#!/bin/bash
# hold 3: pre (main 2c79c40, before the held request) vs new (9c603e1) vs nginx, 4 rounds in rotated order, then perf stat each once
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
P="./m.sh pre 4 -- /tmp/s6f/pg-pre -config /tmp/s6f/cfg.yaml"
N="./m.sh new 4 -- /tmp/s6f/pg-new -config /tmp/s6f/cfg.yaml"
G="./m.sh nginx 4 -- nginx -p /tmp/s6f/ng -c /tmp/s6f/nginx.conf -e /tmp/s6f/ng/error.log"
$P; $N; $G
$N; $G; $P
$G; $P; $N
$P; $N; $G
PERFSTAT=1 ./m.sh pre_stat 5 -- /tmp/s6f/pg-pre -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh new_stat 5 -- /tmp/s6f/pg-new -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh nginx_stat 5 -- nginx -p /tmp/s6f/ng -c /tmp/s6f/nginx.conf -e /tmp/s6f/ng/error.log
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
