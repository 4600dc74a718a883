#!/bin/bash
# pickmin.sh N V...: as ../../2026-12-02-s13/seat/scripts/pickmin.sh, over /tmp/tr14/route.$V.test (base: a
# clean git archive of main fb54b15; new: the worktree): N rounds, the binaries' order rotating; in each,
# BenchmarkPickersPrompt tokens/64, PodSamples/64 and BenchmarkPick probe d=2/64, -test.count 5 x 100,000 picks
cd /tmp/tr14
n=$1; shift
uptime
vs=("$@")
for i in $(seq 1 $n); do
  for j in $(seq 0 $((${#vs[@]} - 1))); do
    v=${vs[$(( (i + j) % ${#vs[@]} ))]}
    ./route.$v.test -test.run XX -test.bench 'BenchmarkPickersPrompt(PodSamples)?/policy=probe/load=tokens/backends=64$|BenchmarkPick/policy=probe/d=2/backends=64$' -test.benchmem -test.count 5 -test.benchtime 100000x | grep ns/op | sed "s/^/$v r$i /"
  done
done
uptime
