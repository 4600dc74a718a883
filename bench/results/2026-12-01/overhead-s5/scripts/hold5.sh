#!/bin/bash
# hold 5: hijacked SSE pump with raw writes (peekhj) against without (peek), BenchmarkForwardLarge/sse, 8 pairs ABBA, task-clock of the test process
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
for i in 1 2 3 4 5 6 7 8; do
  if [ $((i%2)) = 1 ]; then o="peek peekhj"; else o="peekhj peek"; fi
  for b in $o; do
    echo -n "$b "; perf stat -x, -e task-clock -o /tmp/s5/tc.txt ./route-$b.test -test.run xxx -test.bench 'BenchmarkForwardLarge/sse' -test.benchtime 40x 2>&1 | grep -o "Benchmark.*" | tr "\n" " "; awk -F, "/task-clock/{print \"task-clock-ms=\" \$1}" /tmp/s5/tc.txt
  done
done
echo "end $(date -u +%T) $(uptime)"
