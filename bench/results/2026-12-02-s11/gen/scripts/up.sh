#!/bin/bash
# up.sh start|stop: two raw epoll upstreams (the bench's, as in the overhead scenario on Linux) on 18201/18202
case $1 in
start)
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18201 /tmp/gen11/bench >/tmp/gen11/up1.log 2>&1 & echo $! > /tmp/gen11/up1.pid
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18202 /tmp/gen11/bench >/tmp/gen11/up2.log 2>&1 & echo $! > /tmp/gen11/up2.pid
sleep 0.5;;
stop) kill $(cat /tmp/gen11/up1.pid) $(cat /tmp/gen11/up2.pid);;
esac
