#!/bin/bash
# usage: S=strategy run.sh out.md [extra ttftwhy args]
out=$1; shift
nice -n 19 ./ttftwhy -trace /work/shared/traces/azure_code_2023.csv -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -strategies ${S:-probe_pod} "$@" > $out 2> ${out%.md}.err
echo "$out: $(grep ns ${out%.md}.err | sed 's/.*R=\([18]\): \(.*\) ns last pod\/others/R=\1 \2/' | tr '\n' ' ')"
echo "   p99 $(grep '^| probe\|^| cached\|^| least\|^| oracle' $out | cut -d'|' -f2,6 | tr '\n' ' ')"
