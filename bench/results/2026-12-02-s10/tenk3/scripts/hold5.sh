#!/bin/bash
# disturbance: 3k req/s for 6 s, two busy loops for 0.3 s 1 s in; generator FIFO (bench's) and LIFO (net/http-like)
cd /tmp/tk3
echo "start $(date -u +%T) $(uptime)"
./up.sh start
NG="nginx -p /tmp/tk3/ng -e /tmp/tk3/ng/logs/error.log -c /tmp/tk3/ng/nginx.conf"
R=${R:-3000}
for i in 1 2 3; do
for gen in fifo lifo; do
OLB=/tmp/tk3/openloop; [ $gen = lifo ] && OLB=/tmp/tk3/openloop-lifo
OL=$OLB BURST=0.3 ./ol2.sh base-g$gen $R 6s -- /tmp/tk3/pg-base -config /tmp/tk3/cfg-least_inflight.yaml
OL=$OLB BURST=0.3 ./ol2.sh lifo-g$gen $R 6s -- /tmp/tk3/pg-lifo -config /tmp/tk3/cfg-least_inflight.yaml
OL=$OLB BURST=0.3 ./ol2.sh nginx-g$gen $R 6s -- $NG
done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
