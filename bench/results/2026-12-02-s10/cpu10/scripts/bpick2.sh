#!/bin/bash
# bpick2.sh N: BenchmarkPick probe d=2 (2 and 8 backends) and least_inflight (2 backends) at a fixed count
# (1e6 picks), base and new alternated N times; each run's user+sys CPU (GNU time) / 1e6 = CPU ns per pick
# (process-wide, so it includes the test binary's start, about the same for both).
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"
for i in $(seq $1); do
 for b in 'policy=probe/d=2/backends=2$' 'policy=probe/d=2/backends=8$' 'policy=least_inflight/d=2/backends=2$'; do
  for v in base new; do
   o=$( { /usr/bin/time -f "CPU %U %S" ./route-$v.test -test.run '^$' -test.bench "BenchmarkPick\$/$b" -test.benchtime 1000000x -test.cpu 1 ; } 2>&1)
   ns=$(echo "$o" | awk '/ns\/op/{print $3}'); cpu=$(echo "$o" | awk '/^CPU/{printf "%.0f", ($2+$3)*1e9/1e6}')
   echo "$v $b wall_ns/op=$ns cpu_ns/op=$cpu"
  done
 done
done
echo "end $(date -u +%T) $(uptime)"
