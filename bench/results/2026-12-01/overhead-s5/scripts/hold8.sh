#!/bin/bash
# hold 8: main after the raw peek and pump (pg-new): default GOMAXPROCS against GOMAXPROCS=1, 4 pairs, then perf stat each and a sched_switch record
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then ./m.sh new 4 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml; GOMAXPROCS=1 ./m.sh new_gmp1 4 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml
  else GOMAXPROCS=1 ./m.sh new_gmp1 4 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml; ./m.sh new 4 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml; fi
done
PERFSTAT=1 ./m.sh new_stat 5 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml
PERFSTAT=1 GOMAXPROCS=1 ./m.sh new_gmp1_stat 5 -- /tmp/s5/pg-new -config /tmp/s5/cfg.yaml
setsid /tmp/s5/pg-new -config /tmp/s5/cfg.yaml > /tmp/s5/pgrec2.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -e sched:sched_switch -g -p $pid -o /tmp/s5/perf-sw-new.data -- sleep 3 >/dev/null 2>&1 &
wrk -t2 -c64 -d3s -s post.lua http://127.0.0.1:18080/v1/completions | grep Requests
sleep 1
kill -9 $pid
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
