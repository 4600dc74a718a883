#!/bin/bash
# prof.sh NAME DUR -- CMD...: like cnt.sh but perf record -g (kernel+user) of CMD's processes for DUR s under wrk
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/sc/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
pids=$(pgrep -g $pid | paste -sd,)
wrk -t2 -c64 -d$((dur+2))s -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions > /tmp/sc/$name.wrk &
w=$!
sleep 1
perf record -F 2999 -g -p $pids -o /tmp/sc/$name.perfdata -- sleep $dur 2>/dev/null >/dev/null
wait $w
grep -E "Requests/sec" /tmp/sc/$name.wrk
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
