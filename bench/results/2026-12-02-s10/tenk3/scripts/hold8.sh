#!/bin/bash
# generator connection order after a disturbance: 2k req/s for 6 s, two busy loops for 0.3 s 1 s in;
# the bench's generator (fasthttp pool, FIFO: rotates over every connection it opened) vs the same with
# LIFO (net/http's idle-connection order, as the vegeta command line): probegate base and nginx
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/tk3/ng -e /tmp/tk3/ng/logs/error.log -c /tmp/tk3/ng/nginx.conf"
R=${R:-2000}
for i in 1 2 3; do
for gen in fifo lifo; do
OLB=/tmp/tk3/openloop; [ $gen = lifo ] && OLB=/tmp/tk3/openloop-lifo
OL=$OLB BURST=0.3 ./ol2.sh base-g$gen $R 6s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
OL=$OLB BURST=0.3 ./ol2.sh nginx-g$gen $R 6s -- $NG
done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
