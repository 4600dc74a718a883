#!/bin/bash
# up.sh start|stop: the overhead scenario's two raw epoll upstreams (the bench binary of main fb54b15,
# PROBEGATE_BENCH_RAW_UPSTREAM, as bench -scenario overhead starts them on Linux) on 18201/18202.
case $1 in
start)
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18201 /tmp/ep14/bench >/tmp/ep14/up1.log 2>&1 & echo $! > /tmp/ep14/up1.pid
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18202 /tmp/ep14/bench >/tmp/ep14/up2.log 2>&1 & echo $! > /tmp/ep14/up2.pid
sleep 0.5;;
stop) kill $(cat /tmp/ep14/up1.pid) $(cat /tmp/ep14/up2.pid);;
esac
