#!/bin/bash
# live.sh OUTDIR VARIANT "SEED..." [EXTRA...]: the same-requests A/B of route.load.pod_speed_fresh.
# One bench invocation per seed runs both arms (probe_fresh, probe_nofresh: pod_speed_fresh true and
# false, one binary, one process) on that seed's requests, the arm that goes first alternating with the
# seed (odd: probe_fresh first). Trace cells replay exactly ROWS rows per seed (-trace-rows, no capacity
# measured), seed s's window starting at the offset offsets.py gives for it (so seeds continue each
# other's windows); lognormal cells use -capacity 22.2 (session 14's measured capacity).
# Run under the lock and the boost:
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash live.sh ...
set -e
out=$1; variant=$2; seeds=$3; shift 3
B=${BENCH:-/tmp/tr15/bench}
ROWS=${ROWS:-116}
here=$(dirname $(readlink -f $0))
mkdir -p $out
cd /work/wt-trace
for s in $seeds; do
  if [ $((s % 2)) = 1 ]; then order=probe_fresh,probe_nofresh; else order=probe_nofresh,probe_fresh; fi
  case $variant in
    trace_*)
      # window 0 of the invocation (-seed s -seeds 1) is seed s's: first row + (s-1) x ROWS
      off=$(python3 $here/offsets.py $ROWS 1 $s | tail -1 | sed 's/.*-trace-offset //')
      [ $s = 1 ] && off=180s
      args="-scenario trace -trace /work/shared/traces/azure_code_2023.csv -trace-rows $ROWS -trace-offset $off";;
    *) args="-scenario ${variant%%_*} -capacity 22.2";;
  esac
  echo "start $variant seed $s $order $(date -u +%FT%TZ) $(uptime) $(cat /proc/self/autogroup)" >> $out/uptime.txt
  $B $args -variants $variant -strategies $order -duration 15s -seed $s -seeds 1 -no-progress \
    -out $out/s$s "$@" > $out/s$s.log 2>&1
  echo "end $variant seed $s $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
done
