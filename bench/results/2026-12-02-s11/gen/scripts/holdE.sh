#!/bin/bash
# holdE: does probegate stop falling behind at 10k when it gets more of the CPU? 10k, 4 s, openloop-new
# (LIFO, 1 s warm-up); probe and least_inflight at nice 0 and at nice -5 (same session), nginx; 4 rounds.
cd /tmp/gen11
echo "start $(date -u +%T) $(uptime) autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
./up.sh start
NG="nginx -p /tmp/gen11/ng -e /tmp/gen11/ng/logs/error.log -c /tmp/gen11/nginx.conf"
export OL=/tmp/gen11/openloop-new WARMREQ=10000
for i in $(seq ${N:-4}); do
./ol2.sh probe-n0 10000 4s -- /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh probe-n-5 10000 4s -- nice -n -5 /tmp/gen11/pg -config /tmp/gen11/cfg-probe.yaml
./ol2.sh least-n0 10000 4s -- /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh least-n-5 10000 4s -- nice -n -5 /tmp/gen11/pg -config /tmp/gen11/cfg-least_inflight.yaml
./ol2.sh nginx-n0 10000 4s -- $NG
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
