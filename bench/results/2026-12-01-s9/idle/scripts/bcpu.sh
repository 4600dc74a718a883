#!/bin/bash
# CPU time (user+system, the whole test process: client, proxy, upstream)
# for a fixed amount of BenchmarkForwardLarge work, alternating two route
# test binaries (old, new) PAIRS times: a figure the machine's load moves
# less than ns/op. Each run: 1 MiB JSON x 1000, then SSE (256 B frames)
# 1 MiB x 100, each in its own process.
# usage (from route/): bcpu.sh PAIRS OLD.test NEW.test OUTDIR
set -e
pairs=$1 old=$2 new=$3 out=$4
mkdir -p "$out"
uptime >> "$out/uptime.txt"
for i in $(seq 1 "$pairs"); do
	for bin in "$old" "$new"; do
		name=$(basename "$bin" .test)
		for tc in json:1000x sse:100x; do
			sub=${tc%%:*} n=${tc##*:}
			/usr/bin/time -f "$sub $n wall %e user %U sys %S" -a -o "$out/cpu-$name.txt" \
				"$bin" -test.run '^$' -test.bench "BenchmarkForwardLarge/$sub" -test.benchtime "$n" -test.benchmem >> "$out/large-$name.txt"
		done
	done
	uptime >> "$out/uptime.txt"
done
