#!/bin/bash
# alternates old (main at 4d97e63, session start) and new route test binaries, 7 rounds
cd /tmp/seedpick
echo "locked $(date -u +%T) $(uptime)"
for i in 1 2 3 4 5 6 7; do
  ./route-old.test -test.run XXX -test.bench 'BenchmarkPickersPrompt/policy=probe/load=/backends=64$' -test.benchmem -test.benchtime 200000x | grep ^Bench | sed "s/^/old $i /"
  ./route-new.test -test.run XXX -test.bench 'BenchmarkPickersPrompt(PodSamples)?/policy=probe/load=/backends=64$' -test.benchmem -test.benchtime 200000x | grep ^Bench | sed "s/^/new $i /"
done
echo "ended $(date -u +%T) $(uptime)"
