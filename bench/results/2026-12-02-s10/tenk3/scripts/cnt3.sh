#!/bin/bash
# cnt3.sh NAME DUR C -- CMD...: start CMD (on 18080), warm 1 s with wrk -c64, grow the upstream pool with
# wrk -c512 for 1 s (a burst), then wrk -t2 -cC for DUR s: req/s, p99, CPU and user us/req of CMD (/proc),
# upstream connections established at the end (ss).
name=$1; dur=$2; c=$3; shift 4
cd /tmp/tk3
setsid "$@" > /tmp/tk3/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
W="-s /tmp/tk3/post.lua http://127.0.0.1:18080/v1/completions"
wrk -t2 -c64 -d1s $W >/dev/null
wrk -t2 -c512 -d1s $W >/dev/null
up0=$(ss -Htn state established '( dport = :18001 or dport = :18002 )' | wc -l)
tck=$(getconf CLK_TCK)
gcpu() { local s=0 u=0; for p in $(pgrep -g $pid); do read a b < <(awk '{print $14+$15, $14}' /proc/$p/stat 2>/dev/null); s=$((s+${a:-0})); u=$((u+${b:-0})); done; echo $s $u; }
read c0 u0 < <(gcpu)
out=$(wrk -t2 -c$c -d${dur}s --latency $W)
read c1 u1 < <(gcpu)
up=$(ss -Htn state established '( dport = :18001 or dport = :18002 )' | wc -l)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
echo "$name c=$c n=$n rps=$rps p99=$p99 cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) up_after_burst=$up0 up_at_end=$up load=$(cut -d' ' -f1 /proc/loadavg)"
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
