#!/bin/bash
# conncount.sh NAME CFG BIN: perf stat connect/close/accept4 syscalls of the proxy for 5 s under wrk -t2 -c64
cd /tmp/c10
name=$1; cfg=$2; bin=$3
setsid $bin -config $cfg > /tmp/c10/$name.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:18080/v1/completions > /tmp/c10/$name.wrk &
w=$!
sleep 0.5
perf stat -x, -e syscalls:sys_enter_connect,syscalls:sys_enter_close,syscalls:sys_enter_accept4,syscalls:sys_enter_socket,raw_syscalls:sys_enter -p $pid -- sleep 5 2>&1 | cut -d, -f1,3
wait $w; grep -E "Requests/sec" /tmp/c10/$name.wrk
kill -9 -- -$pid; wait $pid 2>/dev/null
