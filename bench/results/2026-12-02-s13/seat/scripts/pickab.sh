#!/bin/bash
# pickab.sh N V...: alternate the route test binaries /tmp/seat13/route.$V.test N times on
# BenchmarkPickersPrompt (and PodSamples) tokens at 64 backends and BenchmarkPick probe d=2 at 64, 200,000 picks a run;
# the order of the binaries rotates each round (round i starts with the i-th)
cd /tmp/seat13
n=$1; shift
uptime
vs=("$@")
for i in $(seq 1 $n); do
  for j in $(seq 0 $((${#vs[@]} - 1))); do
    v=${vs[$(( (i + j) % ${#vs[@]} ))]}
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPickersPrompt/policy=probe/load=tokens/backends=64$' -test.benchmem -test.count 1 -test.benchtime 200000x | grep ns/op | sed "s/^/$v /"
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPick/policy=probe/d=2/backends=64$' -test.benchmem -test.count 1 -test.benchtime 200000x | grep ns/op | sed "s/^/$v /"
  done
done
uptime
