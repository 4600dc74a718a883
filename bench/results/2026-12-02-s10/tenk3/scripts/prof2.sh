#!/bin/bash
# prof2.sh NAME RATE DUR -- CMD...: like ol2.sh (one run), plus a CPU profile of the run from the
# admin listener (18081) and minor page faults per request. MW=N: openloop -max-workers N.
name=$1; rate=$2; dur=$3; shift 4
cd /tmp/tk3
setsid "$@" > /tmp/tk3/$name.log 2>&1 &
pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
U=http://127.0.0.1:18080/v1/completions
/tmp/tk3/openloop -rate 2000 -duration 1s $U > /dev/null
tck=$(getconf CLK_TCK)
gcpu() { awk '{print $14+$15, $10}' /proc/$pid/stat; }
read c0 f0 < <(gcpu)
secs=$(echo "$dur" | tr -d s)
curl -s -o /tmp/tk3/out/$name.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=$secs" & cp=$!
/tmp/tk3/openloop -rate $rate -duration $dur -window 250ms ${MW:+-max-workers $MW} $U > /tmp/tk3/$name.ol
wait $cp
read c1 f1 < <(gcpu)
n=$(tail -1 /tmp/tk3/$name.ol | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
echo "$name rate=$rate mw=${MW:-512} $(tail -1 /tmp/tk3/$name.ol | python3 -c 'import json,sys; d=json.load(sys.stdin); print("achieved=%.0f p50=%.2f p99=%.2f"%(d["achieved_rps"],d["latency_ms"]["p50"],d["latency_ms"]["p99"]))') n=$n cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/$n" | bc) minflt/req=$(echo "scale=3; ($f1-$f0)/$n" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
python3 -c '
import json,sys
ws=[json.loads(l) for l in open(sys.argv[1]) if "start_ms" in l]
print("   inflight  :", " ".join("%d"%w["in_flight_at_end"] for w in ws))' /tmp/tk3/$name.ol
echo $n > /tmp/tk3/out/$name.n
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
