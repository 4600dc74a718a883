#!/bin/bash
# hold-g.sh ROUNDS: BenchmarkForward/proxy/least_inflight (sequential) and parallel/proxy/least_inflight,
# four builds rotated: base (b5bf8d3), new (idle release, slack release/4), s1 (slack = release), off (new code, release never armed)
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
for i in $(seq ${1:-4}); do
 case $((i % 4)) in 1) o="base new s1 off";; 2) o="off base new s1";; 3) o="s1 off base new";; 0) o="new s1 off base";; esac
 for b in $o; do
  (cd /work/wt-cpu/route && /tmp/cpu12/route-$b.test -test.run '^$' -test.bench 'BenchmarkForward$/^proxy$/^least_inflight$' -test.benchtime 30000x -test.cpu 2 2>&1 | grep Benchmark | sed "s/^/$b r$i /")
  (cd /work/wt-cpu/route && /tmp/cpu12/route-$b.test -test.run '^$' -test.bench 'BenchmarkForward$/^parallel$/^proxy$/^least_inflight$' -test.benchtime 60000x -test.cpu 2 2>&1 | grep Benchmark | sed "s/^/$b r$i /")
 done
done
echo "end $(date -u +%T) $(uptime)"
