#!/bin/bash
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
L="/tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml"
PROF=w64 ./cnt2.sh li 4 64 -- $L
PROF=w512 ./cnt2.sh li 4 512 -- $L
PROF=wclose CLOSE=1 ./cnt2.sh li 4 64 -- $L
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
