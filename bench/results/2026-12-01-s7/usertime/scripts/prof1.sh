#!/bin/bash
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
./up.sh start
PERFARGS=--all-user ./prof.sh $1 $2
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
