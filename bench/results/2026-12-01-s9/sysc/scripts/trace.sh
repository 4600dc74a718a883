#!/bin/bash
# trace.sh NAME DUR -- CMD...: perf trace -s (per-syscall count and kernel time) of CMD's processes for DUR s under wrk
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/sc/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
pids=$(pgrep -g $pid | paste -sd,)
wrk -t2 -c64 -d$((dur+2))s -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions > /tmp/sc/$name.wrk &
w=$!
sleep 1
timeout -s INT $dur perf trace -s -p $pids -o /tmp/sc/$name.trace >/dev/null 2>&1
wait $w
grep -E "Requests/sec" /tmp/sc/$name.wrk
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
