#!/bin/bash
# mem-series.sh ROUNDS: memwarm.py (3000 connections, warm-up >= 50k requests over 500 connections,
# A 60 s after the warm-up, B 3 s and 60 s after the last connection), builds alternated per round:
# plain mode base13/new, stream mode base13/new; then off (release disabled) once in each mode.
# Not a timing measurement (no lock); run at chrt -i 0 nice -n 19.
cd /tmp/idle13
echo "start $(date -u +%T) $(uptime)"
./upmem.sh start
export WAITA=60 WAIT1=3 WAIT2=60
for i in $(seq ${1:-2}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for mode in plain stream; do
  for b in $o; do bin=/tmp/probegate-base13; [ $b = new ] && bin=/tmp/idle13/pg-new1
   MODE=$mode python3 memwarm.py m-$b-$mode-$i 3000 500 -- $bin -config /tmp/idle13/cfg-mem.yaml; done
 done
done
for mode in plain stream; do MODE=$mode python3 memwarm.py m-off-$mode 3000 500 -- /tmp/idle13/pg-off -config /tmp/idle13/cfg-mem.yaml; done
./upmem.sh stop
echo "end $(date -u +%T) $(uptime)"
