#!/bin/bash
# pprof.sh NAME BIN: a 5 s CPU profile (admin /debug/pprof/profile) under wrk -t2 -c64
cd /tmp/s8f
name=$1; bin=$2
setsid $bin -config /tmp/s8f/cfg.yaml > /tmp/s8f/$name.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
curl -s -o /tmp/s8f/$name.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=5" &
cp=$!
wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E "Requests/sec"
wait $cp
kill -9 -- -$pid; wait $pid 2>/dev/null
