#!/bin/bash
# live.sh OUTDIR ORDER [EXTRA...]: issue 13's trace_hetero_r8 goal cell (the goals README's command, probe
# only), base (bench.base: a clean git archive of main fb54b15, run from there) and new (bench.new: the
# worktree, run from it), one after the other in ORDER ("base new" or "new base"); EXTRA: more bench flags
# (-seed S -seeds N, -variants ...). Run under the lock and the boost:
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh live.sh ...
set -e
out=$1; order=$2; shift 2
mkdir -p $out
for v in $order; do
  if [ $v = base ]; then cd /tmp/tr14/base; else cd /work/wt-trace; fi
  echo "start $v $(date -u +%FT%TZ) $(uptime) $(cat /proc/self/autogroup)" >> $out/uptime.txt
  /tmp/tr14/bench.$v -scenario trace -variants trace_hetero_r8 -strategies probe -duration 15s \
    -trace /work/shared/traces/azure_code_2023.csv -no-progress -out $out/$v "$@" > $out/$v.log 2>&1
  echo "end $v $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
done
