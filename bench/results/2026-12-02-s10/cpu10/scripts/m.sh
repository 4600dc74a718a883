#!/bin/bash
# m.sh NAME DUR -- CMD...: start CMD (listening on 18080), warm up 1 s, wrk -t2 -c64 DUR s,
# print req/s, p99, CPU and user us/req of CMD's process group (from /proc), context switches per request.
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/c10/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/c10/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gucpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gcs() { cat /proc/$pid/task/*/status 2>/dev/null | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
u0=$(gucpu); c0=$(gcpu); read v0 n0 < <(gcs)
out=$(wrk -t2 -c64 -d${dur}s --latency -s /tmp/c10/post.lua http://127.0.0.1:18080/v1/completions)
u1=$(gucpu); c1=$(gcpu); read v1 n1 < <(gcs)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
echo "$name rps=$rps p99=$p99 cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr_us_per_req=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) vcs/req=$(echo "scale=3; ($v1-$v0)/$n" | bc) ivcs/req=$(echo "scale=3; ($n1-$n0)/$n" | bc)"
kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
