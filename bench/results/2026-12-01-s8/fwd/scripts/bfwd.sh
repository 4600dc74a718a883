#!/bin/bash
# bfwd.sh PAIRS: BenchmarkForward proxy/least_inflight and parallel/proxy/least_inflight, route-base.test (4d97e63)
# vs route-new.test, PAIRS alternated pairs, 2 s each; then BenchmarkForwardLarge (1 MiB JSON and SSE), 3 pairs, 1 s each.
cd /tmp/s8f
echo "start $(date -u +%T) $(uptime)"
for i in $(seq $1); do
  if [ $((i%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    for pat in 'BenchmarkForward$/^proxy$/^least_inflight$' 'BenchmarkForward$/^parallel$/^proxy$/^least_inflight$'; do
      ./route-$v.test -test.run '^$' -test.bench "$pat" -test.benchtime 2s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
    done
  done
done
for i in 1 2 3; do
  for v in base new; do
    ./route-$v.test -test.run '^$' -test.bench 'BenchmarkForwardLarge' -test.benchtime 1s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
  done
done
echo "end $(date -u +%T) $(uptime)"
