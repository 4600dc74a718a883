#!/bin/bash
# one flock hold:
#  (a) the early-answer watch, adfd762^ (old) vs adfd762 (new), 11 rounds, fresh proxies each round,
#      warm-up includes two requests of the round's largest body per proxy
#  (b) the silent-stream watch's request-path cost: route test binaries of 8d1ec1a (base) and
#      s11-watch (new) alternated, BenchmarkForwardLarge (SSE 1 MiB in 256 B frames, JSON 1 MiB)
#      and BenchmarkForward/proxy/least_inflight, 5 rounds each, GNU time for process CPU
out=/tmp/watch-bench/upload3.tsv
echo "# locked $(date -u +%T) $(uptime)" > $out
/tmp/watch-bench/upload -bin old=/tmp/pg-old -bin new=/tmp/pg-adfd762 -rounds 11 -warm-large >> $out 2>/tmp/watch-bench/upload3.err
echo "# done $(date -u +%T) $(uptime)" >> $out
b=/tmp/watch-bench/fwd.txt
echo "# locked $(date -u +%T) $(uptime)" > $b
for r in 1 2 3 4 5; do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for v in $order; do
    echo "== round $r $v large" >> $b
    /usr/bin/time -f "cpu %U user %S sys %e wall" /tmp/watch-bench/route-$v.test -test.run XXX -test.bench 'BenchmarkForwardLarge' -test.benchtime 300x -test.benchmem >> $b 2>&1
    echo "== round $r $v forward" >> $b
    /tmp/watch-bench/route-$v.test -test.run XXX -test.bench 'BenchmarkForward/proxy/least_inflight$' -test.benchtime 20000x -test.benchmem >> $b 2>&1
  done
done
echo "# done $(date -u +%T) $(uptime)" >> $b
