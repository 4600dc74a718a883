#!/bin/bash
# live.sh OUTDIR "SEED...": same-requests live A/B of scrape.foreign_budget on
# the bench's replicas_r8 (8 pods, 8 proxy replicas, lognormal sizes). One bench
# invocation per seed runs both arms (probe_budget: foreign_budget
# config.DefaultForeignBudget; probe_nobudget: 0) on that seed's requests, the
# arm that goes first alternating with the seed (odd: probe_budget first);
# -capacity 22.2 (session 14's measured capacity) so every seed offers the same
# rates. Run under the lock and the boost:
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash live.sh ...
set -e
out=$1; seeds=$2
B=${BENCH:-/tmp/podcost/bench}
mkdir -p $out
cd /work/wt-podcost
for s in $seeds; do
  if [ $((s % 2)) = 1 ]; then order=probe_budget,probe_nobudget; else order=probe_nobudget,probe_budget; fi
  echo "start seed $s $order $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
  $B -scenario replicas -capacity 22.2 -variants replicas_r8 -strategies $order -duration 15s -seed $s -seeds 1 -no-progress \
    -out $out/s$s > $out/s$s.log 2>&1
  echo "end seed $s $(date -u +%FT%TZ) $(uptime)" >> $out/uptime.txt
done
