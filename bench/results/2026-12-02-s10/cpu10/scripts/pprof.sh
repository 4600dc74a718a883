#!/bin/bash
# pprof.sh NAME BIN CFG: a 5 s CPU profile and an allocs profile (admin /debug/pprof) under wrk -t2 -c64
cd /tmp/c10
name=$1; bin=$2; cfg=$3
setsid $bin -config $cfg > /tmp/c10/$name.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
curl -s -o /tmp/c10/$name.allocs0 "http://127.0.0.1:18081/debug/pprof/allocs"
curl -s -o /tmp/c10/$name.cpu.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=5" &
cp=$!
wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E "Requests/sec|requests in"
wait $cp
curl -s -o /tmp/c10/$name.allocs1 "http://127.0.0.1:18081/debug/pprof/allocs"
kill -9 -- -$pid; wait $pid 2>/dev/null
