#!/bin/bash
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2; do
MW=512 ./prof2.sh li512-$i 6000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
MW=64 ./prof2.sh li64-$i 6000 4s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
