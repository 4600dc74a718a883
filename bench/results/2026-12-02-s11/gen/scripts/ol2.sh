#!/bin/bash
# ol2.sh NAME RATE DUR -- CMD...: start CMD (listening on 18280), warm 1 s at 2k req/s open loop,
# then REP runs of RATE req/s for DUR with 250 ms windows (MW=N: openloop -max-workers N).
# Per run: achieved, p50/p99, CPU us/req of CMD's process group, GC cycles, system-wide TCP
# passive/active opens per request (nstat; accepts = client conns to the target + upstream accepts),
# and every 250 ms the established client conns (sport 18280) and upstream conns (dport 18201/18202).
name=$1; rate=$2; dur=$3; shift 4
cd /tmp/gen11
set -m; GODEBUG=gctrace=1 "$@" > /tmp/gen11/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18280/v1/completions -d '{}' && break; sleep 0.1; done
U=http://127.0.0.1:18280/v1/completions
${OL:-/tmp/gen11/openloop} -rate 2000 -duration 1s $U > /dev/null
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $pid); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
opens() { nstat -az TcpPassiveOpens TcpActiveOpens 2>/dev/null | awk '/TcpPassiveOpens/{p=$2} /TcpActiveOpens/{a=$2} END{print p, a}'; }
for rep in $(seq ${REP:-1}); do
gc0=$(grep -c '^gc ' /tmp/gen11/$name.log)
c0=$(gcpu); read p0 a0 < <(opens)
${OL:-/tmp/gen11/openloop} -rate $rate -duration $dur -window 250ms ${MW:+-max-workers $MW} $U > /tmp/gen11/$name.ol & o=$!
( while kill -0 $o 2>/dev/null; do cl=$(ss -Htn state established '( sport = :18280 )' | wc -l); up=$(ss -Htn state established '( dport = :18201 or dport = :18202 )' | wc -l); echo "$cl/$up"; sleep 0.25; done ) > /tmp/gen11/$name.ss &
sp=$!
[ -n "$TRACE" ] && (sleep 1.5; curl -s -o /tmp/gen11/out/$name.$(date +%H%M%S).trace "http://127.0.0.1:18281/debug/pprof/trace?seconds=1"; curl -s http://127.0.0.1:18281/metrics > /tmp/gen11/out/$name.$(date +%H%M%S).metrics) &
[ -n "$BURST" ] && (sleep 1; for k in 1 2; do timeout $BURST sh -c 'while :; do :; done' & done; wait) &
wait $o; wait $sp
c1=$(gcpu); read p1 a1 < <(opens)
gc1=$(grep -c '^gc ' /tmp/gen11/$name.log)
n=$(tail -1 /tmp/gen11/$name.ol | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
echo "$name rate=$rate mw=${MW:-512} $(tail -1 /tmp/gen11/$name.ol | python3 -c 'import json,sys; d=json.load(sys.stdin); print("achieved=%.0f p50=%.2f p99=%.2f succ=%.3f"%(d["achieved_rps"],d["latency_ms"]["p50"],d["latency_ms"]["p99"],d["success"]))') cpu_us_per_req=$(echo "scale=1; ($c1-$c0)*1000000/$tck/($n+${WARMREQ:-0})" | bc) passive/req=$(echo "scale=4; ($p1-$p0)/$n" | bc) active/req=$(echo "scale=4; ($a1-$a0)/$n" | bc) gcs=$((gc1-gc0)) load=$(cut -d' ' -f1 /proc/loadavg)"
python3 -c '
import json,sys
ws=[json.loads(l) for l in open(sys.argv[1]) if "start_ms" in l]
print("   p99/window:", " ".join("%.0f"%w["p99_ms"] for w in ws))
print("   inflight  :", " ".join("%d"%w["in_flight_at_end"] for w in ws))
print("   conns cl/up:", " ".join(l.strip() for l in open(sys.argv[2])))
fl=[w["in_flight_at_end"] for w in ws]
first=next((i for i,f in enumerate(fl) if f>=100),None)
rec=first is not None and any(f<50 for f in fl[first:])
print("   behind: windows>=100 in flight %d of %d; max in flight %d; first behind at window %s; back below 50 after: %s"%(sum(1 for f in fl if f>=100),len(fl),max(fl),first,rec))' /tmp/gen11/$name.ol /tmp/gen11/$name.ss
cp /tmp/gen11/$name.ol /tmp/gen11/out/$name.$(date +%H%M%S).ol
done
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
