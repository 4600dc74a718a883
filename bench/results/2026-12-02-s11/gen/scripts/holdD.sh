#!/bin/bash
# holdD: 10k req/s, 4 s, 250 ms windows, the session-11 generator (LIFO; openloop-new, built from the
# s11-gen tree with LoopGen.Warm) with its default warm-up (1 s at the rate, same connections, not
# measured) and with -warmup 0, 5 rounds, the order swapped every other round, every target.
cd /tmp/gen11
echo "start $(date -u +%T) $(uptime) autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
./up.sh start
NG="nginx -p /tmp/gen11/ng -e /tmp/gen11/ng/logs/error.log -c /tmp/gen11/nginx.conf"
R=${R:-10000}; D=${D:-4s}; N=${N:-5}
for i in $(seq $N); do
ws="warm nowarm"; [ $((i%2)) = 0 ] && ws="nowarm warm"
for w in $ws; do
if [ $w = warm ]; then export OL=/tmp/gen11/openloop-new WARMREQ=$R; else export OL=/tmp/gen11/openloop-new0 WARMREQ=0; fi
./ol2.sh direct-$w $R $D -- /tmp/gen11/direct.sh
./ol2.sh probe-$w $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh least-$w $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh nginx-$w $R $D -- $NG
done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
