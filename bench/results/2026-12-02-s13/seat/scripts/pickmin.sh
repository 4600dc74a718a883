#!/bin/bash
# pickmin.sh N V...: N rounds; in each, every binary /tmp/seat13/route.$V.test (order rotating) runs
# BenchmarkPickersPrompt tokens at 64 and BenchmarkPick probe d=2 at 64, -test.count 5 x 100,000 picks;
# each line is tagged "V rROUND" so pickmincmp.py can take the min of the 5 per round and pair rounds
cd /tmp/seat13
n=$1; shift
uptime
vs=("$@")
for i in $(seq 1 $n); do
  for j in $(seq 0 $((${#vs[@]} - 1))); do
    v=${vs[$(( (i + j) % ${#vs[@]} ))]}
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPickersPrompt/policy=probe/load=tokens/backends=64$|BenchmarkPick/policy=probe/d=2/backends=64$' -test.benchmem -test.count 5 -test.benchtime 100000x | grep ns/op | sed "s/^/$v r$i /"
  done
done
uptime
