#!/bin/bash
# hold 4: raw peek (pg-peek) against main (pg-main), 8 pairs ABBA, wrk 4 s each; then peek default vs GOMAXPROCS=1, 3 pairs
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4 5 6 7 8; do
  if [ $((i%2)) = 1 ]; then o="main peek"; else o="peek main"; fi
  for b in $o; do ./m.sh $b 4 -- /tmp/s5/pg-$b -config /tmp/s5/cfg.yaml; done
done
for i in 1 2 3; do
  ./m.sh peek 4 -- /tmp/s5/pg-peek -config /tmp/s5/cfg.yaml
  GOMAXPROCS=1 ./m.sh peek_gmp1 4 -- /tmp/s5/pg-peek -config /tmp/s5/cfg.yaml
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
