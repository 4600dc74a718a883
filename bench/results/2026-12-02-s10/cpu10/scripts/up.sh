#!/bin/bash
# up.sh start|stop: the overhead scenario's two raw epoll upstreams (the bench binary as child) on 18001/18002
case $1 in
start)
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18001 setsid /tmp/c10/bench >/tmp/c10/up1.log 2>&1 & echo $! > /tmp/c10/up1.pid
PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18002 setsid /tmp/c10/bench >/tmp/c10/up2.log 2>&1 & echo $! > /tmp/c10/up2.pid
sleep 0.5;;
stop) kill $(cat /tmp/c10/up1.pid) $(cat /tmp/c10/up2.pid);;
esac
