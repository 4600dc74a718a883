#!/bin/bash
# runs.sh SET LOGDIR TAG BIN: one set of route tests of the route test binary BIN (go test -race
# -c), each -test.count N under starved.sh (session 12's starve.sh with a hard deadline), from
# route/, appended to LOGDIR/TAG.log. Run it under flock /work/.bench.lock.
#   leftovers: s14's leftover tests under starve 2 300 1500 (two busy loops, 300 ms stops every
#              0.75-2.25 s; s14's reproduction of the progress tests' failures);
#   longstops: the tests s14 saw answered 504, and the refusals test, under starve 1 2500 6000
#              (one busy loop, 2.5 s stops every 3-9 s: longer than a 2 s upstream timeout).
set=$1 logs=$2 tag=$3 bin=$4
D=$(cd "$(dirname "$0")" && pwd)
cd /work/wt-flaky/route
run() { # secs count regexp
  bash $D/starved.sh $1 $logs/$tag.log $starve $bin -test.v -test.count $2 -test.timeout $(( $1 - 10 ))s -test.run "$3"
}
case $set in
leftovers)
  starve="2 300 1500"
  run 200 3 '^TestQueuedStreamsNeverOpenAProgressingBackendsBreakerUnderBlindPolicies$'
  run 150 2 '^TestRetryWarmPoolKillCostsNoClientError$'
  run 60 10 '^TestUpstreamTLSReloadRotates$'
  run 60 10 '^TestRefusalsCountedUnderNone$' ;;
longstops)
  starve="1 2500 6000"
  run 100 20 '^TestUpstreamTLSReloadRotates$'
  run 300 3 '^TestRetryWarmPoolKillCostsNoClientError$'
  run 100 10 '^TestRefusalsCountedUnderNone$' ;;
esac
