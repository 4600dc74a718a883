#!/bin/bash
# hold2.sh: base (5f506f9) vs new2 (HEAD of s7-usertime after the 5 cuts) alternated.
# 1) BenchmarkForward/proxy/least_inflight and parallel/proxy/least_inflight, 4 pairs, 2 s each;
# 2) wrk -t2 -c64 5 s with perf stat (m.sh), 5 pairs.
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then order="base new2"; else order="new2 base"; fi
  for v in $order; do
    for pat in 'BenchmarkForward$/^proxy$/^least_inflight$' 'BenchmarkForward$/^parallel$/^proxy$/^least_inflight$'; do
      /tmp/s7u/route-$v.test -test.run '^$' -test.bench "$pat" -test.benchtime 2s -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$v /"
    done
  done
done
echo "mid $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4 5; do
  if [ $((i%2)) = 1 ]; then order="base new2"; else order="new2 base"; fi
  for v in $order; do PERFSTAT=1 ./m.sh $v-h2-$i 5 -- /tmp/s7u/pg-$v -config /tmp/s7u/cfg.yaml; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
