#!/bin/bash
# bfwd.sh N: BenchmarkForward (sequential and parallel, proxy/least_inflight and proxy/probe), base and new test binaries alternated N times, 1 s each
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"
for i in $(seq $1); do
 if [ $((i%2)) = 1 ]; then order="base new"; else order="new base"; fi
 for v in $order; do
  ./route-$v.test -test.run '^$' -test.bench 'BenchmarkForward$/(proxy|parallel/proxy)/' -test.benchtime 1s 2>&1 | grep ^Benchmark | sed "s/^/$v /"
 done
done
echo "end $(date -u +%T) $(uptime)"
