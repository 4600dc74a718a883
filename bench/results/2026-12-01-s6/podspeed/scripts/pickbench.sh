#!/bin/bash
# Pick cost, old (main 9c603e1, learned speeds) vs new (s6-podspeed, learned + pod-reported), alternated 7 times.
cd /tmp/pods
out=/tmp/pods/pick_bench.txt
flock /work/.bench.lock bash -c '
echo "start $(date -u +%T) $(uptime)" >> '$out'
for i in 1 2 3 4 5 6 7; do
  for b in old new; do
    for m in tokens requests; do
      echo "$b $m $(./route_$b.test -test.run XX -test.bench "BenchmarkPickersPrompt/policy=probe/load=$m/backends=64\$" -test.benchmem -test.count 1 -test.benchtime 200000x | grep ^Bench)" >> '$out'
    done
  done
done
echo "end $(date -u +%T) $(uptime)" >> '$out'
'
