#!/bin/bash
# bpick.sh N: BenchmarkPick probe and least_inflight (d=2, 2 and 8 backends), base and new test binaries alternated N times, 1 s each
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"
for i in $(seq $1); do
 for v in base new; do
  ./route-$v.test -test.run '^$' -test.bench 'BenchmarkPick$/policy=(probe|least_inflight)/d=2/backends=(2|8)$' -test.benchtime 1s 2>&1 | grep ^Benchmark | sed "s/^/$v /"
 done
done
echo "end $(date -u +%T) $(uptime)"
