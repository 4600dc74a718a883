#!/bin/bash
# ol4.sh NAME RATE DUR -- CMD...: start CMD (listening on 18080), warm 1 s at 1k req/s open loop, then
# one openloop run of RATE req/s for DUR (MW=N: -max-workers N); prints achieved, p50/p99, CPU µs/req of CMD's process group
name=$1; rate=$2; dur=$3; shift 4
cd /tmp/cpu12
set -m; "$@" > /tmp/cpu12/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
U=http://127.0.0.1:18080/v1/completions
/tmp/cpu12/openloop -rate 1000 -duration 1s $U > /dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
c0=$(gcpu)
/tmp/cpu12/openloop -rate $rate -duration $dur -window 250ms ${MW:+-max-workers $MW} $U > /tmp/cpu12/$name.ol
c1=$(gcpu)
n=$(tail -1 /tmp/cpu12/$name.ol | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
echo "$name rate=$rate mw=${MW:-512} $(tail -1 /tmp/cpu12/$name.ol | python3 -c 'import json,sys; d=json.load(sys.stdin); print("achieved=%.0f p50=%.2f p99=%.2f succ=%.3f"%(d["achieved_rps"],d["latency_ms"]["p50"],d["latency_ms"]["p99"],d["success"]))') cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
