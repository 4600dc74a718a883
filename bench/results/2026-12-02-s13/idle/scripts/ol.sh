#!/bin/bash
# ol.sh NAME RATE DUR -- CMD...: start CMD in its own process group (listening on 18280, admin 18281
# when probegate) with GODEBUG=gctrace=1, wait until it answers, then openloop -rate RATE -duration DUR
# -window 250ms (the overhead scenario's generator: 512 workers at most, warm-up a third of DUR, at
# most 1 s, on the same connections, not measured). Prints achieved rate, p50/p99, CPU us/request of
# CMD's process group (/proc, warm-up requests included: WARMREQ), GC cycles in the run (gctrace lines),
# their CPU (gctrace's cpu fields: sweep-term + assist + background + mark-term, and idle-mark
# separately), bytes allocated per request (go_memstats_alloc_bytes_total from the admin /metrics).
name=$1; rate=$2; dur=$3; shift 4
cd /tmp/idle13
set -m; GODEBUG=gctrace=1 "$@" > /tmp/idle13/out/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' -XPOST localhost:18280/v1/completions -d '{}')" = 200 ] && break; sleep 0.1; done
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
alloc() { curl -s localhost:18281/metrics 2>/dev/null | awk '/^go_memstats_alloc_bytes_total /{print $2}'; }
gl0=$(grep -c '^gc ' /tmp/idle13/out/$name.log); c0=$(gcpu); a0=$(alloc)
/tmp/idle13/openloop -rate $rate -duration $dur -window 250ms http://127.0.0.1:18280/v1/completions > /tmp/idle13/out/$name.ol
c1=$(gcpu); a1=$(alloc)
n=$(tail -1 /tmp/idle13/out/$name.ol | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
gcs=$(tail -n +$((gl0+1)) /tmp/idle13/out/$name.log | grep '^gc ' | python3 -c '
import re,sys
n=0; busy=0.0; idle=0.0
for l in sys.stdin:
    m=re.search(r"([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu", l)
    if m:
        a,b,c,d,e=map(float,m.groups()); n+=1; busy+=a+b+c+e; idle+=d
print("gcs=%d gc_cpu_ms=%.1f gc_idle_ms=%.1f"%(n,busy,idle))')
abr="-"; [ -n "$a0" ] && [ -n "$a1" ] && abr=$(python3 -c "print('%.0f'%(($a1-$a0)/($n+${WARMREQ:-0})))")
echo "$name rate=$rate $(tail -1 /tmp/idle13/out/$name.ol | python3 -c 'import json,sys; d=json.load(sys.stdin); print("achieved=%.0f p50=%.2f p99=%.2f succ=%.3f"%(d["achieved_rps"],d["latency_ms"]["p50"],d["latency_ms"]["p99"],d["success"]))') cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/($n+${WARMREQ:-0})" | bc) $gcs alloc_B_per_req=$abr load=$(cut -d' ' -f1 /proc/loadavg)"
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
