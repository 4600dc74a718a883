#!/bin/bash
# cnt3.sh NAME DUR C -- CMD...: start CMD (listening on 18080), warm 1 s (wrk -c C), then
# wrk -t2 -cC DUR s; prints req/s, p99, CPU and user us/req of CMD's process group (/proc),
# minor faults per request, upstream connections at the end. CLOSE=1: every request on a new
# client connection (wrk -H 'Connection: close').
name=$1; dur=$2; c=$3; shift 4
cd /tmp/conn11
setsid "$@" > /tmp/conn11/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
H=(); [ -n "$CLOSE" ] && H=(-H 'Connection: close')
wrk -t2 -c$c -d1s "${H[@]}" -s /tmp/conn11/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0 u=0 f=0; for p in $(pgrep -g $pid); do read a b m < <(awk '{print $14+$15, $14, $10}' /proc/$p/stat 2>/dev/null); s=$((s+${a:-0})); u=$((u+${b:-0})); f=$((f+${m:-0})); done; echo $s $u $f; }
read c0 u0 f0 < <(gcpu)
[ -n "$PROF" ] && { curl -s -o /tmp/conn11/out/$PROF.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=$dur" & cp=$!; }
[ -n "$SYSC" ] && { perf stat -x, -e raw_syscalls:sys_enter -p $(pgrep -g $pid | paste -sd,) -o /tmp/conn11/out/$name.sysc -- sleep $dur & sp=$!; }
out=$(wrk -t2 -c$c -d${dur}s --latency "${H[@]}" -s /tmp/conn11/post.lua http://127.0.0.1:18080/v1/completions)
read c1 u1 f1 < <(gcpu)
[ -n "$PROF" ] && { wait $cp; echo $(echo "$out" | awk '/requests in/{print $1}') > /tmp/conn11/out/$PROF.n; }
sc=; [ -n "$SYSC" ] && { wait $sp; sc=$(awk -F, '/raw_syscalls/{print $1}' /tmp/conn11/out/$name.sysc); }
up=$(ss -Htn state established '( dport = :18001 or dport = :18002 )' | wc -l)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
echo "$name c=$c close=${CLOSE:-0} n=$n rps=$rps p99=$p99 cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) minflt/req=$(echo "scale=3; ($f1-$f0)/$n" | bc) up_conns=$up ${SYSC:+syscalls/req=$(echo "scale=2; $sc/$n" | bc)} load=$(cut -d' ' -f1 /proc/loadavg)"
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
