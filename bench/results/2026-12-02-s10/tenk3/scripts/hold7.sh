#!/bin/bash
# client conns vs upstream conns: wrk -c512 with the upstream pool uncapped (20000/backend) or capped at 32/backend
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3; do
./cnt2.sh uncapped 4 512 -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
./cnt2.sh cap32 4 512 -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-li-cap32.yaml
./cnt2.sh uncapped 4 64 -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
