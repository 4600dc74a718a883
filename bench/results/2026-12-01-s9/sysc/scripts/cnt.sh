#!/bin/bash
# cnt.sh NAME DUR -- CMD...: start CMD (listening on 18080), warm up 1 s, wrk -t2 -c64 DUR s
# while perf stat counts every syscall (syscalls:sys_enter_*), context switches and migrations
# of CMD's processes/threads; prints per-request figures, plus CPU us/req from /proc.
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/sc/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gucpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gcs() { for p in $(pgrep -g $pid); do cat /proc/$p/task/*/status; done 2>/dev/null | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
pids=$(pgrep -g $pid | paste -sd,)
[ -z "$NOPERF" ] && { perf stat -x, -e task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter,'syscalls:sys_enter_*' -p $pids -o /tmp/sc/$name.perfstat & ps=$!; sleep 1.5; }
c0=$(gcpu); u0=$(gucpu); read v0 n0 < <(gcs)
out=$(wrk -t2 -c64 -d${dur}s --latency -s /tmp/sc/post.lua http://127.0.0.1:18080/v1/completions)
c1=$(gcpu); u1=$(gucpu); read v1 n1 < <(gcs)
[ -z "$NOPERF" ] && { kill -INT $ps; wait $ps; }
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
echo "$name n=$n rps=$rps p99=$p99 cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) vcs/req=$(echo "scale=3; ($v1-$v0)/$n" | bc) ivcs/req=$(echo "scale=3; ($n1-$n0)/$n" | bc) threads=$(ls /proc/$pid/task | wc -l)"
[ -z "$NOPERF" ] && awk -F, -v n=$n '/^[0-9]/ && $1>0 {printf "   %-40s %8.3f/req\n", $3, $1/n}' /tmp/sc/$name.perfstat | sort -k2 -nr | head -30
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
