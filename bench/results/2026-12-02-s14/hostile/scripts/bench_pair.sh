#!/bin/bash
# bench_pair.sh: old (main fb54b15) and new (s14-hostile) route test binaries,
# alternating, 3 rounds each, in one hold. Run under
#   flock /work/.bench.lock bash .../boosted.sh bash bench_pair.sh
# Binaries built with: go test -c -o /tmp/route-{old,new}.test ./route
set -u
cd /work/wt-hostile/route
uptime
for r in 1 2 3; do
  for v in old new; do
    echo "== round $r $v"
    /tmp/route-$v.test -test.run '^$' -test.bench 'BenchmarkForward$/^proxy/least_inflight$|BenchmarkForward$/^proxy/probe$|BenchmarkStreamFirstToken|BenchmarkAllowPath' -test.benchmem -test.benchtime 2s -test.count 1 2>&1 | grep -E '^Benchmark'
  done
done
uptime
