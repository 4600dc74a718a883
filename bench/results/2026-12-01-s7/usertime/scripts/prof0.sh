#!/bin/bash
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
./up.sh start
./pprof.sh base-prof /tmp/s7u/pg-base
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
