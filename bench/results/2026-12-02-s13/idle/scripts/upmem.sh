#!/bin/bash
# upmem.sh start|stop: two sseup upstreams (short SSE streams, small JSON) on 18101/18102 for memwarm.py
case $1 in
start)
set -m
/tmp/idle13/sseup-bin 127.0.0.1:18101 >/tmp/idle13/out/upm1.log 2>&1 & echo $! > /tmp/idle13/upm1.pid
/tmp/idle13/sseup-bin 127.0.0.1:18102 >/tmp/idle13/out/upm2.log 2>&1 & echo $! > /tmp/idle13/upm2.pid
set +m
sleep 0.5;;
stop) kill $(cat /tmp/idle13/upm1.pid) $(cat /tmp/idle13/upm2.pid);;
esac
