#!/bin/bash
# hold 1: where does CPU per request go now (main at 9b49b1e)
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3; do
  ./m.sh pg 5 -- /tmp/s5/pg-main -config /tmp/s5/cfg.yaml
  GOMAXPROCS=1 ./m.sh pg_gmp1 5 -- /tmp/s5/pg-main -config /tmp/s5/cfg.yaml
done
PERFSTAT=1 ./m.sh pg_stat 5 -- /tmp/s5/pg-main -config /tmp/s5/cfg.yaml
PERFSTAT=1 GOMAXPROCS=1 ./m.sh pg_gmp1_stat 5 -- /tmp/s5/pg-main -config /tmp/s5/cfg.yaml
PERFSTAT=1 ./m.sh nginx_stat 5 -- nginx -p /tmp/s5/ng -c /tmp/s5/nginx.conf -e /tmp/s5/ng/error.log
# where threads block: sched_switch with user stacks
setsid /tmp/s5/pg-main -config /tmp/s5/cfg.yaml > /tmp/s5/pgrec.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -F 2000 -g -p $pid -o /tmp/s5/perf-cpu.data -- sleep 5 >/dev/null 2>&1 &
wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:18080/v1/completions | grep Requests
wait %2 2>/dev/null; sleep 1
perf record -e sched:sched_switch -g -p $pid -o /tmp/s5/perf-sw.data -- sleep 3 >/dev/null 2>&1 &
wrk -t2 -c64 -d3s -s post.lua http://127.0.0.1:18080/v1/completions | grep Requests
sleep 1
kill -9 $pid
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
