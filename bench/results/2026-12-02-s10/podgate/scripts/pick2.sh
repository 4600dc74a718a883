#!/bin/bash
# alternates main's and this branch's route test binaries, 7 rounds
out=/tmp/podgate/live/pick2.out
echo "locked $(date -u +%T) $(uptime)" > $out
for i in 1 2 3 4 5 6 7; do
  for b in main new; do
    echo "== $b round $i" >> $out
    /tmp/podgate/route_$b.test -test.run XX -test.bench 'BenchmarkPickersPrompt(PodSamples)?/policy=probe/load=/backends=64$' -test.benchmem -test.count 1 -test.benchtime 200000x >> $out 2>&1
  done
done
echo "ended $(date -u +%T) $(uptime)" >> $out
