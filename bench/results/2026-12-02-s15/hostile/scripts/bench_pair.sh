#!/bin/bash
# bench_pair.sh: old (main eb1887b, this session's start) and new (s15-hostile)
# route test binaries, alternating, 3 rounds each, in one hold. Run under
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash bench_pair.sh
# Binaries: git archive eb1887b | tar -x -C /tmp/hostile-old; (cd /tmp/hostile-old && go test -c -o /tmp/route-old.test ./route);
#           go test -c -o /tmp/route-new.test ./route  (in the worktree)
set -u
cd /work/wt-hostile/route
uptime
for r in 1 2 3; do
  for v in old new; do
    echo "== round $r $v"
    /tmp/route-$v.test -test.run '^$' -test.bench 'BenchmarkForward$/^proxy/least_inflight$|BenchmarkForward$/^proxy/probe$|BenchmarkStreamFirstToken|BenchmarkCleanHeaders|BenchmarkCleanRequestWithClientID' -test.benchmem -test.benchtime 2s -test.count 1 2>&1 | grep -E '^Benchmark'
  done
done
uptime
