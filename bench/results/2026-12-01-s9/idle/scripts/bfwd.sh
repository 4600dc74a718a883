#!/bin/sh
# Alternates two route test binaries (old, new) PAIRS times:
# BenchmarkForwardLarge (2 s per sub-benchmark) and BenchmarkForward (1 s).
# usage (from route/): bfwd.sh PAIRS OLD.test NEW.test OUTDIR
set -e
pairs=$1 old=$2 new=$3 out=$4
mkdir -p "$out"
uptime >> "$out/uptime.txt"
for i in $(seq 1 "$pairs"); do
	for bin in "$old" "$new"; do
		name=$(basename "$bin" .test)
		"$bin" -test.run '^$' -test.bench 'BenchmarkForwardLarge' -test.benchtime 2s -test.benchmem >> "$out/large-$name.txt"
		"$bin" -test.run '^$' -test.bench 'BenchmarkForward$' -test.benchtime 1s -test.benchmem >> "$out/fwd-$name.txt"
	done
	uptime >> "$out/uptime.txt"
done
