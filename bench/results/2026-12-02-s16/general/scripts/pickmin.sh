#!/bin/bash
# pickmin.sh N V...: session 13's pickmin.sh for /tmp/gen16/route.$V.test: N rounds; in each, every binary (order rotating) runs
# BenchmarkPickersPrompt tokens at 64 and BenchmarkPick probe d=2 at 64, -test.count 5 x 100,000 picks; lines tagged "V rROUND"
# (pickmincmp.py, session 13's, takes the min of the 5 per round and pairs rounds)
cd /tmp/gen16
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
