#!/bin/bash
# up.sh start|stop: two fast upstreams (the bench's, as child processes) on 18001/18002
case $1 in
start)
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18001 setsid /tmp/conn11/bench >/tmp/conn11/up1.log 2>&1 & echo $! > /tmp/conn11/up1.pid
PROBEGATE_BENCH_UPSTREAM=127.0.0.1:18002 setsid /tmp/conn11/bench >/tmp/conn11/up2.log 2>&1 & echo $! > /tmp/conn11/up2.pid
sleep 0.5;;
stop) kill $(cat /tmp/conn11/up1.pid) $(cat /tmp/conn11/up2.pid);;
esac
