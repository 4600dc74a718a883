#!/bin/bash
# one flock hold: slow/12MiB only, old (adfd762^), main (b3be2d4), backoff (b3be2d4 + doubling slices), 9 rounds
out=/tmp/watch-bench/upload5.tsv
echo "# locked $(date -u +%T) $(uptime)" > $out
/tmp/watch-bench/upload -bin old=/tmp/pg-old -bin main=/tmp/pg-main -bin backoff=/tmp/pg-backoff -rounds 9 -warm-large -only slow/12MiB >> $out 2>/tmp/watch-bench/upload5.err
echo "# done $(date -u +%T) $(uptime)" >> $out
