#!/bin/bash
# live.sh OUTDIR [ORDER [EXTRA...]]: the live cell where session 12 confirmed probe's loss (homo, R=1, bimodal,
# on-off, capacity 15.2), base (bench.base run from a clean checkout of 96f658b) and new (bench.new from the
# worktree), 3 seeds each; ORDER "base new" (default) or "new base"; EXTRA more bench flags (e.g. -seed 4)
set -e
out=$1; order=${2:-base new}; shift; shift || true
mkdir -p $out
for v in $order; do
  if [ $v = base ]; then cd /tmp/seat13/base; else cd /work/wt-seat; fi
  echo "start $v $(date -u +%FT%TZ) $(uptime) $(cat /proc/self/autogroup)" >> $out/uptime.txt
  /tmp/seat13/bench.$v -scenario replicas -variants replicas_r1 -sizes bimodal -arrivals onoff -fleet homo -capacity 15.2 \
    -strategies round_robin,cached,probe -seeds 3 -duration 18s -pod-history 1 -no-progress -out $out/$v "$@" > $out/$v.log 2>&1
  echo "end $v $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
done
