#!/bin/bash
# bench_pair.sh: route test binaries of main fe2fe81 (this session's start,
# no head verdict) and of s16-hostile (headReceived), alternating, 3 rounds,
# in one hold. Run under
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash bench_pair.sh
# Binaries: git archive fe2fe81 | tar -x -C /tmp/hostile-old; (cd /tmp/hostile-old && go test -c -o /tmp/hostile/route-old.test ./route)
#           go test -c -o /tmp/hostile/route-new.test ./route   (in the worktree)
set -u
cd /work/wt-hostile/route
uptime
for r in 1 2 3; do
  for v in old new; do
    echo "== round $r $v"
    /tmp/hostile/route-$v.test -test.run '^$' -test.bench 'BenchmarkForward$/^proxy/least_inflight$|BenchmarkAllowPath|BenchmarkHeadReceived' -test.benchmem -test.benchtime 2s -test.count 1 2>&1 | grep -E '^Benchmark'
  done
done
uptime
