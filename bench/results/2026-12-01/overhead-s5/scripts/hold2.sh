#!/bin/bash
# hold 2: hijacked SSE pump, raw writes (route-hj) against main (route-main), alternating
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3 4; do
 for b in main hj; do
  echo -n "$b "; perf stat -x, -e task-clock -o /tmp/s5/tc.txt ./route-$b.test -test.run xxx -test.bench 'BenchmarkForwardLarge/sse' -test.benchtime 40x -test.cpu 2 2>&1 | grep -o "Benchmark.*" | tr "\n" " "; awk -F, "/task-clock/{print \"task-clock-ms=\" \$1}" /tmp/s5/tc.txt
 done
done
echo "end $(date -u +%T) $(uptime)"
