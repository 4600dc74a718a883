#!/bin/bash
# hold6.sh: perf record -F 1999 -g of base and watch, 4 s each under wrk -t2 -c64 POST; perf report by symbol.
cd /tmp/ab13
echo "uptime start: $(uptime)"
set -m
nginx -p /tmp/ab13 -c /tmp/ab13/up.conf & UP=$!
/tmp/probegate-base13 -config pg-a.yaml & A=$!
/tmp/pg-watch -config pg-b.yaml & B=$!
set +m
sleep 1.5
for v in "base $A 18231" "watch $B 18232"; do
  set -- $v
  wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:$3/v1/completions >/dev/null
  perf record -F 1999 -g -p $2 -o prof-$1.data -- sleep 4 >/dev/null 2>&1 & sp=$!
  out=$(wrk -t2 -c64 -d4s -s post.lua http://127.0.0.1:$3/v1/completions); wait $sp
  echo "$1 $(echo "$out" | awk '/requests in/{print $1}') requests in 4 s"
done
kill $A $B $UP; wait 2>/dev/null
echo "uptime end: $(uptime)"
