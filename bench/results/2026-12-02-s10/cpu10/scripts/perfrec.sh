#!/bin/bash
# perfrec.sh NAME CFG DUR -- CMD...: perf record -F 2999 -g (user+kernel) of CMD's process group for DUR s under wrk -t2 -c64
cd /tmp/c10
name=$1; cfg=$2; dur=$3; shift 4
setsid "$@" -config $cfg > /tmp/c10/$name.log 2>&1 & pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
wrk -t2 -c64 -d$((dur+2))s -s post.lua http://127.0.0.1:18080/v1/completions > /tmp/c10/$name.wrk &
w=$!
sleep 1
perf record -F 2999 -g -p $pid -o /tmp/c10/$name.perfdata -- sleep $dur 2>/dev/null >/dev/null
wait $w
grep -E "Requests/sec|requests in" /tmp/c10/$name.wrk
kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
