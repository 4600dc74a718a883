#!/bin/bash
# usage: hold.sh BENCH NAME bench-args...   (the caller wraps it in flock /work/.bench.lock)
B=$1; name=$2; shift 2
echo "locked $(date -u +%T) $(uptime)" > /tmp/podgate/live/$name.log
$B "$@" -no-progress -out /tmp/podgate/live/$name >> /tmp/podgate/live/$name.log 2>&1
echo "rc=$? ended $(date -u +%T) $(uptime)" >> /tmp/podgate/live/$name.log
