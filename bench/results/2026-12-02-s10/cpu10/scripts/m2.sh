#!/bin/bash
# m2.sh NAME DUR -- CMD...: start CMD (listening on 18080), warm up 1 s, wrk -t2 -c64 DUR s.
# Prints req/s, p50/p99, the target's CPU and user us/req (its process group, /proc), its voluntary and
# involuntary context switches per request, wrk's own CPU us/req, the upstreams' CPU us/req, and the
# machine's idle share over the run (/proc/stat).
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/c10/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/c10/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in "$@"; do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gucpu() { local s=0; for p in "$@"; do v=$(awk '{print $14}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gcs() { for p in "$@"; do cat /proc/$p/task/*/status; done 2>/dev/null | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
idle() { awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
tp=$(pgrep -g $pid); up="$(cat /tmp/c10/up1.pid) $(cat /tmp/c10/up2.pid)"
u0=$(gucpu $tp); c0=$(gcpu $tp); read v0 n0 < <(gcs $tp); uc0=$(gcpu $up); read i0 t0 < <(idle)
out=$(/usr/bin/time -f "WRKCPU %U %S" wrk -t2 -c64 -d${dur}s --latency -s /tmp/c10/post.lua http://127.0.0.1:18080/v1/completions 2>&1)
u1=$(gucpu $tp); c1=$(gcpu $tp); read v1 n1 < <(gcs $tp); uc1=$(gcpu $up); read i1 t1 < <(idle)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
p50=$(echo "$out" | awk '$1=="50%"{print $2}')
p99=$(echo "$out" | awk '$1=="99%"{print $2}')
wcpu=$(echo "$out" | awk '/WRKCPU/{print $2+$3}')
echo "$name rps=$rps p50=$p50 p99=$p99 cpu=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) usr=$(echo "scale=1; ($u1-$u0)*1000000/$tck/$n" | bc) vcs=$(echo "scale=3; ($v1-$v0)/$n" | bc) ivcs=$(echo "scale=3; ($n1-$n0)/$n" | bc) wrk=$(echo "scale=1; $wcpu*1000000/$n" | bc) ups=$(echo "scale=1; ($uc1-$uc0)*1000000/$tck/$n" | bc) idle=$(echo "scale=3; ($i1-$i0)/($t1-$t0)" | bc) thr=$(ls /proc/$pid/task | wc -l)"
kill -- -$pid 2>/dev/null; sleep 0.3; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
