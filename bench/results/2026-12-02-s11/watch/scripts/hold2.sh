#!/bin/bash
# one flock hold: the early-answer watch, adfd762^ (old) vs adfd762 (new), 11 rounds, fresh proxies each round
out=/tmp/watch-bench/upload2.tsv
{ echo "# locked $(date -u +%T) $(uptime)"; } > $out
/tmp/watch-bench/upload -bin old=/tmp/pg-old -bin new=/tmp/pg-adfd762 -rounds 11 >> $out 2>/tmp/watch-bench/upload2.err
echo "# done $(date -u +%T) $(uptime)" >> $out
