#!/bin/bash
# cnt5.sh NAME DUR C -- CMD...: as cnt4.sh, with perf record -F 2999 -g over CMD's process group during the run (out/NAME.data)
name=$1; dur=$2; c=$3; shift 4
cd /tmp/cpu12
set -m; "$@" > /tmp/cpu12/out/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c$c -d1s -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -F 2999 -g -o /tmp/cpu12/out/$name.data -p $(pgrep -g $pid | paste -sd,) -- sleep $dur 2>/dev/null & sp=$!
out=$(wrk -t2 -c$c -d${dur}s --latency -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions)
wait $sp
n=$(echo "$out" | awk '/requests in/{print $1}'); echo $n > /tmp/cpu12/out/$name.data.n
echo "$name n=$n rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')"
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
