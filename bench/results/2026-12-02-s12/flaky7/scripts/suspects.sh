#!/bin/bash
# the suspects, -count $1, each package after the other
c=${1:-3}
go test -race -count $c -run 'TestProberLoopback' ./probe/ 
go test -race -count $c -run 'TestStreamsFramesAsTheyArrive|TestProbeAvoidsASlowServer|TestRetryStaleConnectionSinglePod|TestHungTrialDoesNotCloseTheBreaker|TestRetryWarmPoolKillCostsNoClientError|TestAnswerBeforeTheBodyReachesTheClient|TestLongGenerationsNeverOpenABreakerUnderBlindPolicies|TestQueuedStreamsNeverOpenAProgressingBackendsBreaker' ./route/
go test -race -count $c -run 'TestTraceReplaySlice|TestOpenLoop|TestRunVegetaOpenLoop|TestRecordsSayWhereEachRequestWent|TestEndToEnd' ./bench/
go test -race -count $c -run 'TestTinySweepUnderTenSeconds' ./bench/fleetsim/
