#!/bin/bash
# hold-h.sh ROUNDS: memory per idle keep-alive client connection (memconn.py, 2000 connections, one request
# each, measured WAIT=${WAIT:-2.5} s after the last one opened), base vs new alternated
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
for i in $(seq ${1:-3}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for b in $o; do bin=/tmp/probegate-base12; [ $b = new ] && bin=/tmp/cpu12/pg-new; WAIT=${WAIT:-2.5} python3 memconn.py mem-$b 2000 idle -- $bin $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
