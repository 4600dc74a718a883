#!/bin/bash
# ovab.sh OUT ROUNDS: alternate base8 and the new binary (probe), plus least_inflight (base8),
# at 2k, 5k and 10k req/s, 4 s each, order reversed every other round.
OUT=$1; R=${2:-3}
NEW=${NEW:-/tmp/tk2/pg-quiet}
uptime >> $OUT.uptime
for r in $(seq $R); do
  if [ $((r % 2)) = 1 ]; then set -- /tmp/probegate-base8 $NEW; else set -- $NEW /tmp/probegate-base8; fi
  for rate in 2000 5000 10000; do
    for b in "$@"; do TAG=r$r /tmp/tk2/ol.sh $b probe $rate 4s; done
    TAG=r$r /tmp/tk2/ol.sh /tmp/probegate-base8 least_inflight $rate 4s
  done
  uptime >> $OUT.uptime
done > $OUT.jsonl
