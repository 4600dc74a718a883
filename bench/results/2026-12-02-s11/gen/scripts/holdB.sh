#!/bin/bash
# holdB: tenk3's hold8: 2k req/s for 6 s, two busy loops for 0.3 s 1 s in; FIFO vs LIFO generator,
# probe, least_inflight and nginx, 5 rounds, the generator order swapped every other round.
cd /tmp/gen11
echo "start $(date -u +%T) $(uptime) autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
./up.sh start
NG="nginx -p /tmp/gen11/ng -e /tmp/gen11/ng/logs/error.log -c /tmp/gen11/nginx.conf"
R=${R:-2000}; N=${N:-5}
for i in $(seq $N); do
gens="fifo lifo"; [ $((i%2)) = 0 ] && gens="lifo fifo"
for gen in $gens; do
export OL=/tmp/gen11/openloop-$gen BURST=0.3
./ol2.sh probe-g$gen $R 6s -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh least-g$gen $R 6s -- /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh nginx-g$gen $R 6s -- $NG
done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
