#!/bin/bash
# the trace engineer's live.sh with "new" = /work/main (main eb196b2, pod_speed_fresh on by default) and /tmp/bench14
set -e
out=$1; order=$2; shift 2
mkdir -p $out
for v in $order; do
  if [ $v = base ]; then cd /tmp/tr14/base; b=/tmp/tr14/bench.base; else cd /work/main; b=/tmp/bench14; fi
  echo "start $v $(date -u +%FT%TZ) $(uptime) $(cat /proc/self/autogroup)" >> $out/uptime.txt
  $b -scenario trace -variants trace_hetero_r8 -strategies probe -duration 15s \
    -trace /work/shared/traces/azure_code_2023.csv -no-progress -out $out/$v "$@" > $out/$v.log 2>&1
  echo "end $v $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
done
