#!/bin/bash
# trace.sh NAME BIN: strace the proxy's read/write/recvfrom for 2 s of wrk -c8, then classify
cd /tmp/s6f
name=$1; bin=$2
setsid $bin -config /tmp/s6f/cfg.yaml > /tmp/s6f/$name.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c8 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
timeout 3 strace -f -qq -yy -e trace=read,write,recvfrom,epoll_pwait -o /tmp/s6f/$name.strace -p $(pgrep -g $pid | paste -sd,) &
sleep 0.5
wrk -t2 -c8 -d2s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E "requests in"
sleep 1.5
kill -9 -- -$pid; wait $pid 2>/dev/null
