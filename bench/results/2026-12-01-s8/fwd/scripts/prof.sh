#!/bin/bash
# prof.sh NAME BIN: perf record -g (cycles) of the proxy for 4 s of wrk -t2 -c64, plus a 4 s pprof CPU profile from the admin listener
cd /tmp/s8f
name=$1; bin=$2
setsid $bin -config /tmp/s8f/cfg.yaml > /tmp/s8f/$name.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -F 4000 -g $PERFARGS -p $pid -o /tmp/s8f/$name.perf.data -- sleep 4 >/dev/null 2>&1 &
wrk -t2 -c64 -d4s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E "Requests/sec"
sleep 1
kill -9 -- -$pid; wait $pid 2>/dev/null
