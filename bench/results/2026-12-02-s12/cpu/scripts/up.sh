#!/bin/bash
# up.sh start|stop: two fast upstreams (the bench's raw epoll upstream) on 18001/18002, each its own process group (same session)
case $1 in
start)
set -m
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18001 /tmp/cpu12/bench >/tmp/cpu12/up1.log 2>&1 & echo $! > /tmp/cpu12/up1.pid
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18002 /tmp/cpu12/bench >/tmp/cpu12/up2.log 2>&1 & echo $! > /tmp/cpu12/up2.pid
set +m
sleep 0.5;;
stop) kill $(cat /tmp/cpu12/up1.pid) $(cat /tmp/cpu12/up2.pid);;
esac
