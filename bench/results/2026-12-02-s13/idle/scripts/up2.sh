#!/bin/bash
# up2.sh start|stop: two raw epoll upstreams (the bench's, as in the overhead scenario on Linux) on 18201/18202
case $1 in
start)
set -m
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18201 /tmp/idle13/bench >/tmp/idle13/out/up21.log 2>&1 & echo $! > /tmp/idle13/up21.pid
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18202 /tmp/idle13/bench >/tmp/idle13/out/up22.log 2>&1 & echo $! > /tmp/idle13/up22.pid
set +m
sleep 0.5;;
stop) kill $(cat /tmp/idle13/up21.pid) $(cat /tmp/idle13/up22.pid);;
esac
