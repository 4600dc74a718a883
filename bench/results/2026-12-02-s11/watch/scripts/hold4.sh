#!/bin/bash
# one flock hold: slow/12MiB only, old (adfd762^), new (adfd762), v100 (stallLook 100 ms), notry (no tryWrite), 9 rounds
out=/tmp/watch-bench/upload4.tsv
echo "# locked $(date -u +%T) $(uptime)" > $out
/tmp/watch-bench/upload -bin old=/tmp/pg-old -bin new=/tmp/pg-adfd762 -bin v100=/tmp/pg-v100 -bin notry=/tmp/pg-notry -rounds 9 -warm-large -only slow/12MiB >> $out 2>/tmp/watch-bench/upload4.err
echo "# done $(date -u +%T) $(uptime)" >> $out
