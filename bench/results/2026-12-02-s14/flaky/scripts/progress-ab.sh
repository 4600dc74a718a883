#!/bin/bash
# progress-ab.sh COUNT LOGDIR TAG BIN...: runs the progress-rule breaker tests of each route test
# binary BIN (built with go test -race -c) under session 12's starve.sh 2 300 1500 (GOMAXPROCS=1,
# SCHED_IDLE nice 19 beside two busy loops, the process group SIGSTOPped 300 ms every 0.75-2.25 s),
# -test.count COUNT, one after the other, from route/. Run it under flock /work/.bench.lock.
count=$1 logs=$2 tag=$3; shift 3
S=/work/wt-flaky/bench/results/2026-12-02-s12/flaky7/scripts/starve.sh
cd /work/wt-flaky/route
for bin in "$@"; do
  name=$(basename $bin .test)
  log=$logs/progress-$tag-$name.log
  echo "== $bin $(date -u +%T) $(uptime)" > $log
  bash $S 2 300 1500 $bin -test.v -test.count $count -test.timeout 9m \
    -test.run 'TestLongGenerationsNeverOpenAProgressingBackendsBreaker$|TestRepeatedStreamKeyCannotOpenAProgressingBackendsBreaker$|TestQueuedStreamsNeverOpenAProgressingBackendsBreaker$|TestLongGenerationsNeverOpenABreakerUnderBlindPolicies$' >> $log 2>&1
  echo "== end $(date -u +%T) $(uptime)" >> $log
done
