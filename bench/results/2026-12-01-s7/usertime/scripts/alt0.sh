#!/bin/bash
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2; do PERFSTAT=1 ./m.sh base$i 4 -- /tmp/s7u/pg-base -config /tmp/s7u/cfg.yaml; done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
