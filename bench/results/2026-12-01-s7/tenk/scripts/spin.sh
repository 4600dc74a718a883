#!/bin/bash
# two busy loops on CPU 1, each in its own session: one at nice 0, one at nice 19; print their CPU shares over 2 s
setsid taskset -c 1 bash -c 'while :; do :; done' & a=$!
setsid nice -n 19 taskset -c 1 bash -c 'while :; do :; done' & b=$!
sleep 0.3
t() { awk '{print $14+$15}' /proc/$1/stat; }
a0=$(t $a); b0=$(t $b); sleep 2; a1=$(t $a); b1=$(t $b)
echo "autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled) nice0 $((a1-a0)) ticks, nice19 $((b1-b0)) ticks (of 200)"
kill $a $b
