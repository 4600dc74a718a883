#!/bin/bash
# holdA: 10k req/s open loop, 4 s, 250 ms windows (tenk3's hold1), 5 rounds; per round every target
# (direct, probe, least_inflight, nginx) with the FIFO generator (main 8d1ec1a's openloop) and the
# LIFO one (this branch), the generator order swapped every other round.
cd /tmp/gen11
echo "start $(date -u +%T) $(uptime) autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
./up.sh start
NG="nginx -p /tmp/gen11/ng -e /tmp/gen11/ng/logs/error.log -c /tmp/gen11/nginx.conf"
R=${R:-10000}; D=${D:-4s}; N=${N:-5}
for i in $(seq $N); do
gens="fifo lifo"; [ $((i%2)) = 0 ] && gens="lifo fifo"
for gen in $gens; do
export OL=/tmp/gen11/openloop-$gen
./ol2.sh direct-g$gen $R $D -- /tmp/gen11/direct.sh
./ol2.sh probe-g$gen $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh least-g$gen $R $D -- /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh nginx-g$gen $R $D -- $NG
done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
