#!/bin/bash
# hold1.sh: BenchmarkForward least_inflight (sequential and parallel) base (5f506f9) vs new, alternated 3 pairs;
# then wrk -t2 -c64 5 s per binary with perf stat, 4 pairs alternated (m.sh).
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3; do
  if [ $((i%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    /tmp/s7u/route-$v.test -test.run '^$' -test.bench 'BenchmarkForward/^(proxy|parallel)$/^(least_inflight|proxy)$/^(least_inflight)?$' -test.benchtime 2s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
  done
done
echo "mid $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do PERFSTAT=1 ./m.sh $v$i 5 -- /tmp/s7u/pg-$v -config /tmp/s7u/cfg.yaml; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
