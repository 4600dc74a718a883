#!/bin/bash
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"; ./up.sh start
./conncount.sh li cfg-least_inflight.yaml /tmp/probegate-base10
./conncount.sh probe cfg-probe.yaml /tmp/probegate-base10
./up.sh stop; echo "end $(date -u +%T) $(uptime)"
