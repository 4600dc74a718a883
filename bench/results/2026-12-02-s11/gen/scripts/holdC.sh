#!/bin/bash
# holdC: 10k req/s, 4 s, LIFO generator (main c9894bf's openloop) with and without a 1 s warm-up at the
# rate on the same attacker (throwaway build openloop-warmexp, OPENLOOP_WARMUP=1s), 3 rounds, all targets;
# then one probe run with a 1 s runtime trace taken 1.5 s in.
cd /tmp/gen11
echo "start $(date -u +%T) $(uptime) autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
./up.sh start
NG="nginx -p /tmp/gen11/ng -e /tmp/gen11/ng/logs/error.log -c /tmp/gen11/nginx.conf"
R=${R:-10000}; D=${D:-4s}; N=${N:-3}
export OL=/tmp/gen11/openloop-warmexp
for i in $(seq $N); do
ws="0 1s"; [ $((i%2)) = 0 ] && ws="1s 0"
for w in $ws; do
export OPENLOOP_WARMUP=$w
./ol2.sh direct-w$w $R $D -- /tmp/gen11/direct.sh
./ol2.sh probe-w$w $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh least-w$w $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh nginx-w$w $R $D -- $NG
done
done
OPENLOOP_WARMUP=0 TRACE=1 ./ol2.sh probe-trace $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
OPENLOOP_WARMUP=1s TRACE=1 ./ol2.sh probe-trace-w1s $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
