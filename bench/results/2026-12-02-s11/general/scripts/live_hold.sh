#!/bin/bash
# Alternates the old (main without the seed band) and new bench binaries,
# one seed each, replicas_r8 with long-lived pods; uptime before and after.
set -u
out=/tmp/gen/live/rep8
mkdir -p $out
uptime > $out/uptime.txt; date >> $out/uptime.txt
for k in 1 2 3 4 5; do
  for v in old new; do
    if [ $(( k % 2 )) -eq 0 ]; then v=$([ $v = old ] && echo new || echo old); fi
    /tmp/gen/bench.$v -scenario replicas -variants replicas_r8 -strategies probe -seed $k -seeds 1 -duration 20s -pod-history 3 -no-progress -out $out/${v}_s$k > $out/${v}_s$k.log 2>&1
    echo "seed $k $v rc=$? $(date +%T)" >> $out/uptime.txt
  done
done
uptime >> $out/uptime.txt; date >> $out/uptime.txt
