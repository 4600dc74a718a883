#!/bin/bash
# hold 6: hijacked SSE pump raw writes (peekhj) against net.Conn writes (peek), 64 paced SSE streams (50 frames 2 ms apart), 6 pairs ABBA, 5 s each
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
setsid /tmp/s5/sseload-bin -up 127.0.0.1:18011 > /tmp/s5/sseup1.log 2>&1 & u1=$!
setsid /tmp/s5/sseload-bin -up 127.0.0.1:18012 > /tmp/s5/sseup2.log 2>&1 & u2=$!
sleep 0.5
for i in 1 2 3 4 5 6; do
  if [ $((i%2)) = 1 ]; then o="peek peekhj"; else o="peekhj peek"; fi
  for b in $o; do ./msse.sh sse_$b 5 -- /tmp/s5/pg-$b -config /tmp/s5/cfg-sse.yaml; done
done
kill $u1 $u2
echo "end $(date -u +%T) $(uptime)"
