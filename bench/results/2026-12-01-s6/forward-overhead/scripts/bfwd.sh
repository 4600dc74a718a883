#!/bin/bash
# bfwd.sh: BenchmarkForward least_inflight (sequential and parallel), revert (main d38c7de without 9c603e1) and new (d38c7de) test binaries alternated, 4 pairs
cd /work/wt-forward/route
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then order="revert new"; else order="new revert"; fi
  for v in $order; do
    /tmp/s6f/route-$v.test -test.run '^$' -test.bench 'BenchmarkForward/^(proxy|parallel/proxy)/least_inflight$' -test.benchtime 2s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
  done
done
echo "end $(date -u +%T) $(uptime)"
