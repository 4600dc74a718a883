#!/bin/bash
# eagain.sh NAME -- CMD...: reads per request that returned EAGAIN (-11) vs data, under wrk -t2 -c64 3 s
name=$1; shift 2
cd /tmp/cpu12
set -m; "$@" > /tmp/cpu12/out/$name.log 2>&1 &
pid=$!; set +m
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf stat -x, -e syscalls:sys_exit_read --filter 'ret == -11' -e syscalls:sys_exit_read --filter 'ret > 0' -e syscalls:sys_exit_recvfrom --filter 'ret == -11' -e syscalls:sys_exit_recvfrom --filter 'ret > 0' -p $(pgrep -g $pid | paste -sd,) -o /tmp/cpu12/out/$name.eagain -- sleep 3 & sp=$!
out=$(wrk -t2 -c64 -d3s -s /tmp/cpu12/post.lua http://127.0.0.1:18080/v1/completions); wait $sp
n=$(echo "$out" | awk '/requests in/{print $1}')
awk -F, -v n=$n -v name=$name 'BEGIN{split("read:EAGAIN read:data recvfrom:EAGAIN recvfrom:data",L," ")} $1 ~ /^[0-9]+$/ {i++; printf "%s %s %.3f/req\n", name, L[i], $1/n}' /tmp/cpu12/out/$name.eagain
kill -- -$pid 2>/dev/null; sleep 0.5; kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
