#!/bin/bash
# pickab.sh N: alternate the session-start and new route test binaries N times on the two pick benchmarks (BenchmarkPickersPrompt tokens at 64 backends, BenchmarkPick probe d=2 at 64)
cd /tmp/seat
uptime
for i in $(seq 1 ${1:-5}); do
  for v in base v2; do
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPickersPrompt/policy=probe/load=tokens/backends=64$' -test.benchmem -test.count 1 -test.benchtime 200000x | grep ns/op | sed "s/^/$v /"
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPick/policy=probe/d=2/backends=64$' -test.benchmem -test.count 1 -test.benchtime 200000x | grep ns/op | sed "s/^/$v /"
  done
done
uptime
