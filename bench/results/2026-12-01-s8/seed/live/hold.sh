#!/bin/bash
# usage: hold.sh NAME bench-args...   (run under flock by the caller)
name=$1; shift
echo "locked $(date -u +%T) $(uptime)" > /tmp/seedlive/$name.log
/tmp/seedlive/bench-seed "$@" -no-progress -out /tmp/seedlive/$name >> /tmp/seedlive/$name.log 2>&1
echo "rc=$? ended $(date -u +%T) $(uptime)" >> /tmp/seedlive/$name.log
