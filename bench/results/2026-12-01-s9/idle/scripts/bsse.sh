#!/bin/bash
# CPU time (user+sys, whole test process) of BenchmarkForwardLarge's SSE
# case (1 MiB of 256-byte frames, x100 per process), alternating two route
# test binaries (old, new) PAIRS times.
# usage (from route/): bsse.sh PAIRS OLD.test NEW.test OUTDIR
set -e
pairs=$1 old=$2 new=$3 out=$4
mkdir -p "$out"
uptime >> "$out/uptime.txt"
for i in $(seq 1 "$pairs"); do
	for bin in "$old" "$new"; do
		name=$(basename "$bin" .test)
		/usr/bin/time -f "sse 100x wall %e user %U sys %S" -a -o "$out/cpu-$name.txt" \
			"$bin" -test.run '^$' -test.bench "BenchmarkForwardLarge/sse" -test.benchtime 100x -test.benchmem >> "$out/large-$name.txt"
	done
done
uptime >> "$out/uptime.txt"
