#!/bin/bash
# up.sh start|stop: two fast upstreams (the bench's raw epoll upstream) on 18001/18002, each its own process group (same session)
case $1 in
start)
set -m
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18001 /tmp/idle13/bench >/tmp/idle13/up1.log 2>&1 & echo $! > /tmp/idle13/up1.pid
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18002 /tmp/idle13/bench >/tmp/idle13/up2.log 2>&1 & echo $! > /tmp/idle13/up2.pid
set +m
sleep 0.5;;
stop) kill $(cat /tmp/idle13/up1.pid) $(cat /tmp/idle13/up2.pid);;
esac
