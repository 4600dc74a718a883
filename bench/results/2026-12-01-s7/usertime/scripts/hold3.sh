#!/bin/bash
# hold3.sh: BenchmarkForward/proxy/least_inflight and parallel/proxy/least_inflight, base (5f506f9 + the
# cpu-us/op benchmark change) vs new2 (s7-usertime, 5 cuts), 6 pairs alternated, 2 s each; CPU per op from getrusage.
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3 4 5 6; do
  if [ $((i%2)) = 1 ]; then order="base new2"; else order="new2 base"; fi
  for v in $order; do
    for pat in 'BenchmarkForward$/^proxy$/^least_inflight$' 'BenchmarkForward$/^parallel$/^proxy$/^least_inflight$'; do
      /tmp/s7u/route-$v.test -test.run '^$' -test.bench "$pat" -test.benchtime 2s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
    done
  done
done
echo "end $(date -u +%T) $(uptime)"
