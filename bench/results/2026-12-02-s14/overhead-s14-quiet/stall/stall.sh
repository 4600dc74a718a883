#!/bin/bash
# stall.sh: probegate least_inflight main (pgnew :18282) vs fb54b15 (pg :18281) vs nginx (:18280) under the
# bench's open-loop generator (openloop, lean transport) at 10k req/s for 3 s with 250 ms windows,
# 6 rounds alternated, against the overhead scenario's raw upstreams; CPU per request of each target.
cd /tmp/ep14
echo "uptime start: $(uptime)"
TARGETS="nginx pg pgnew"
. ./targets.sh
start_targets
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $1); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
for i in 1 2 3 4 5 6; do
  order="nginx pg pgnew"; [ $((i%2)) = 0 ] && order="pgnew pg nginx"
  for t in $order; do
    c0=$(gcpu ${PID[$t]})
    /tmp/openloop14 -rate 10000 -duration 3s -window 250ms http://127.0.0.1:${PORT[$t]}/v1/completions > /tmp/st14/$t-$i.ol 2>&1
    c1=$(gcpu ${PID[$t]})
    echo "round $i $t cpu_ticks $((c1-c0)) $(grep -v '^{' /tmp/st14/$t-$i.ol | tr '\n' ' ' | cut -c1-300)"
  done
done
stop_targets
echo "uptime end: $(uptime)"
