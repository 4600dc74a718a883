#!/bin/bash
# bench_clean.sh: the header-cleaning benchmarks alone (bench_pair.sh's binaries), 5 rounds,
# the order swapped every round, in one hold:
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash scripts/bench_clean.sh
set -u
cd /work/wt-hostile/route
uptime
for r in 1 2 3 4 5; do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for v in $order; do
    echo "== round $r $v"
    /tmp/route-$v.test -test.run '^$' -test.bench 'BenchmarkCleanHeaders|BenchmarkCleanRequestWithClientID' -test.benchmem -test.benchtime 1s -test.count 1 2>&1 | grep -E '^Benchmark'
  done
done
uptime
