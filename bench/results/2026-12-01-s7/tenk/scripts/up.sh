#!/bin/bash
# up.sh start|stop: the bench's two fast upstreams (fasthttp, child mode of the bench binary) on 19001/19002
case $1 in
start)
for p in 19001 19002; do env ${UPENV:-PROBEGATE_BENCH_UPSTREAM}=127.0.0.1:$p setsid ${UPBIN:-/tmp/tk/bench} >/tmp/tk/logs/up$p.log 2>&1 & echo $! > /tmp/tk/up$p.pid; done
sleep 0.5;;
stop) kill $(cat /tmp/tk/up19001.pid) $(cat /tmp/tk/up19002.pid);;
esac
