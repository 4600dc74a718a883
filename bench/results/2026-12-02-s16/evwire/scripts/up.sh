#!/bin/bash
# up.sh start|stop: the overhead scenario's two raw epoll upstreams (the bench binary of main fb54b15,
# PROBEGATE_BENCH_RAW_UPSTREAM, as bench -scenario overhead starts them on Linux) on 18501/18502.
case $1 in
start)
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18501 /tmp/ew16/bench >/tmp/ew16/up1.log 2>&1 & echo $! > /tmp/ew16/up1.pid
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18502 /tmp/ew16/bench >/tmp/ew16/up2.log 2>&1 & echo $! > /tmp/ew16/up2.pid
sleep 0.5;;
stop) kill $(cat /tmp/ew16/up1.pid) $(cat /tmp/ew16/up2.pid);;
esac
