#!/bin/bash
# upab.sh: direct at 10k (openloop, lean transport) against the fasthttp upstreams and the raw epoll upstreams (bench-raw), alternating, 3 pairs; and through nginx at 10k with each
cd /tmp/tk
for r in 1 2 3; do
  for kind in fasthttp raw; do
    if [ $kind = raw ]; then UPENV=PROBEGATE_BENCH_RAW_UPSTREAM UPBIN=/tmp/tk/bench-raw ./up.sh start; else UPBIN=/tmp/tk/bench-raw ./up.sh start; fi
    ./gen.sh up-$kind 10000 x -- ./openloop -rate 10000 -duration 4s
    ./up.sh stop; sleep 0.3
  done
done
