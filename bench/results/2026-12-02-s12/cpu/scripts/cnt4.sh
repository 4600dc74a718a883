#!/bin/bash
# cnt4.sh NAME DUR C -- CMD...: start CMD in its own process group (listening on 18080), warm 1 s
# (wrk -c C), then wrk -t2 -cC DUR s; prints req/s, p50/p99, CPU and user µs/request of CMD's process
# group (/proc). PERF=1: also perf stat over the group during the run: every system call by kind,
# context switches, sched_wakeup, per request (out/NAME.perf). TRACE=1: a 1 s runtime trace from the
# admin listener (out/NAME.trace). CLOSE=1: Connection: close.
name=$1; dur=$2; c=$3; shift 4
cd /tmp/cpu12
set -m; "$@" > /tmp/cpu12/out/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
H=(); [ -n "$CLOSE" ] && H=(-H 'Connection: close')
wrk -t2 -c$c -d1s "${H[@]}" -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0 u=0; for p in $(pgrep -g $pid); do read a b < <(awk '{print $14+$15, $14}' /proc/$p/stat 2>/dev/null); s=$((s+${a:-0})); u=$((u+${b:-0})); done; echo $s $u; }
read c0 u0 < <(gcpu)
if [ -n "$PERF" ]; then
  perf stat -x, -e 'raw_syscalls:sys_enter,syscalls:sys_enter_*,context-switches,sched:sched_wakeup,sched:sched_switch' \
    -p $(pgrep -g $pid | paste -sd,) -o /tmp/cpu12/out/$name.perf -- sleep $dur & sp=$!
fi
[ -n "$TRACE" ] && { curl -s -o /tmp/cpu12/out/$name.trace "http://127.0.0.1:18081/debug/pprof/trace?seconds=1" & tp=$!; }
[ -n "$PROF" ] && { curl -s -o /tmp/cpu12/out/$name.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=$dur" & pp=$!; }
out=$(wrk -t2 -c$c -d${dur}s --latency "${H[@]}" -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions)
read c1 u1 < <(gcpu)
n=$(echo "$out" | awk '/requests in/{print $1}')
[ -n "$PERF" ] && wait $sp
[ -n "$TRACE" ] && wait $tp
[ -n "$PROF" ] && { wait $pp; echo $n > /tmp/cpu12/out/$name.n; }
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p50=$(echo "$out" | awk '$1=="50%"{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
echo "$name c=$c close=${CLOSE:-0} n=$n rps=$rps p50=$p50 p99=$p99 cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
if [ -n "$PERF" ]; then
  echo "$n" > /tmp/cpu12/out/$name.perf.n
  awk -F, -v n=$n '$1 ~ /^[0-9]+$/ && $1 > 0 {printf "  %-40s %8.3f /req\n", $3, $1/n}' /tmp/cpu12/out/$name.perf | sort -k2 -nr | head -25
fi
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
