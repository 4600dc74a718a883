#!/bin/bash
# ol.sh NAME RATE DUR -- CMD...: start CMD (listening on 18080), warm 1 s at 2k req/s open loop,
# then RATE req/s for DUR with 250 ms windows; CPU us/req of CMD's process group, context switches,
# client connections open at the end, GC cycles (GODEBUG=gctrace=1 lines in the log).
name=$1; rate=$2; dur=$3; shift 4
GODEBUG=gctrace=1 setsid "$@" > /tmp/sc/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
U=http://127.0.0.1:18080/v1/completions
/tmp/sc/openloop -rate 2000 -duration 1s $U > /dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
gcs() { for p in $(pgrep -g $pid); do cat /proc/$p/task/*/status; done 2>/dev/null | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
gc0=$(grep -c '^gc ' /tmp/sc/$name.log)
for rep in $(seq ${REP:-1}); do
pids=$(pgrep -g $pid | paste -sd,)
[ -n "$PERF" ] && { perf stat -x, -e task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter,'syscalls:sys_enter_*' -p $pids -o /tmp/sc/$name.perfstat & ps=$!; sleep 1.5; }
c0=$(gcpu); read v0 n0 < <(gcs); t0=$(date +%s.%N)
/tmp/sc/openloop -rate $rate -duration $dur -window 250ms $U > /tmp/sc/$name.ol & o=$!
# BURST=S: two busy loops at normal priority for S seconds, 1 s into the run (a disturbance)
[ -n "$BURST" ] && (sleep 1; for k in 1 2; do timeout $BURST sh -c 'while :; do :; done' & done; wait) &
sleep $(echo "$dur" | tr -d s | awk '{print $1-0.3}')
conns=$(ss -Htn state established '( sport = :18080 )' | wc -l)
wait $o
c1=$(gcpu); read v1 n1 < <(gcs)
[ -n "$PERF" ] && { kill -INT $ps; wait $ps; }
gc1=$(grep -c '^gc ' /tmp/sc/$name.log)
n=$(tail -1 /tmp/sc/$name.ol | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
echo "$name rate=$rate $(tail -1 /tmp/sc/$name.ol | python3 -c 'import json,sys; d=json.load(sys.stdin); print("achieved=%.0f p50=%.2f p99=%.2f succ=%.3f"%(d["achieved_rps"],d["latency_ms"]["p50"],d["latency_ms"]["p99"],d["success"]))') cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) vcs/req=$(echo "scale=3; ($v1-$v0)/$n" | bc) ivcs/req=$(echo "scale=3; ($n1-$n0)/$n" | bc) conns_at_end=$conns gcs=$((gc1-gc0)) load=$(cut -d' ' -f1 /proc/loadavg)"
python3 -c '
import json,sys
ws=[json.loads(l) for l in open(sys.argv[1]) if "start_ms" in l]
print("   p99/window:", " ".join("%.0f"%w["p99_ms"] for w in ws))
print("   inflight  :", " ".join("%d"%w["in_flight_at_end"] for w in ws))' /tmp/sc/$name.ol
[ -n "$PERF" ] && awk -F, -v n=$n '/^[0-9]/ && $1>0 {printf "   %-40s %8.3f/req\n", $3, $1/n}' /tmp/sc/$name.perfstat | sort -k2 -nr | head -14
done
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
