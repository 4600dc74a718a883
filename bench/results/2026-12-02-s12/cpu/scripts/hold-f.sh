#!/bin/bash
# hold-f.sh ROUNDS: BenchmarkForward (sequential and parallel, least_inflight) base vs new alternated;
# then system calls per keep-alive request (perf stat) for base and new, wrk -t2 -c64 4 s
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
for i in $(seq ${1:-5}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for b in $o; do echo "== $b round $i"; (cd /work/wt-cpu/route && /tmp/cpu12/route-$b.test -test.run '^$' -test.bench 'BenchmarkForward/(proxy|parallel/proxy)/least_inflight$' -test.benchtime 20000x -test.cpu 2 2>&1 | grep Benchmark); done
done
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
PERF=1 ./cnt4.sh base 4 64 -- /tmp/probegate-base12 $CFG
PERF=1 ./cnt4.sh new 4 64 -- /tmp/cpu12/pg-new $CFG
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
