#!/bin/bash
# gobench.sh (session 16 evhooks): Go benchmarks of internal/evloop before (evold.test, fe2fe81) and
# after (evnew.test) this session's changes, alternated, 3 rounds; BenchmarkParkResume with and without
# the loop's yield after a turn with a park (evnoyield.test: that runtime.Gosched removed); then a short
# wrk hold of lbpark with and without the yield. Run from /tmp/evh16 under the lock and boost.
cd /tmp/evh16
echo "uptime start: $(date -u +%T) $(uptime)"
for i in 1 2 3; do
  for t in evold evnew; do echo "== $t round $i"; ./$t.test -test.run xxx -test.bench 'Exchange$' -test.benchtime 3s -test.cpu 3 | grep Benchmark; done
  for t in evnew evnoyield; do echo "== $t round $i"; ./$t.test -test.run xxx -test.bench 'ParkResume' -test.benchtime 2000x -test.cpu 1,3 | grep Benchmark; done
done
echo "uptime mid: $(date -u +%T) $(uptime)"
TARGETS="evpark evparkny" bash hold.sh 3
