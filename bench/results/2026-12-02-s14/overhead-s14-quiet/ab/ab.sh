#!/bin/bash
# old (fb54b15) vs new (main 00b7c5c) route test binaries: BenchmarkForward least_inflight, sequential and parallel, alternated
cd /work/main/route
echo "uptime start: $(uptime)"
for i in 1 2 3 4 5 6; do
  order="old new"; [ $((i%2)) = 0 ] && order="new old"
  for v in $order; do
    for b in '^BenchmarkForward$/^proxy$/^least_inflight$' '^BenchmarkForward$/^parallel$/^proxy$/^least_inflight$'; do
      /tmp/ab14-$v.test -test.run XX -test.bench "$b" -test.benchtime 20000x -test.count 1 2>&1 | grep -E "^Benchmark" | sed "s/^/$i $v /"
    done
  done
done
echo "uptime end: $(uptime)"
