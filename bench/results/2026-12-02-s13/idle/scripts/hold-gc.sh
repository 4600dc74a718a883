#!/bin/bash
# hold-gc.sh ROUNDS: probe policy at 10k req/s open loop, 4 s (+1 s warm-up), GOGC=100 (Go's default,
# env unset) vs GOGC=400 alternated (order swapped each round), nginx once per round after them.
cd /tmp/idle13
echo "start $(date -u +%T) $(uptime)"
./up2.sh start
NG="nginx -p /tmp/idle13/ng -e /tmp/idle13/ng/logs/error.log -c /tmp/idle13/nginx-ol.conf"
export WARMREQ=10000
for i in $(seq ${1:-6}); do
 if [ $((i % 2)) = 1 ]; then o="100 400"; else o="400 100"; fi
 for g in $o; do
  if [ $g = 100 ]; then ./ol.sh probe-gogc100-$i 10000 4s -- /tmp/probegate-base13 -config /tmp/idle13/cfg-probe.yaml
  else ./ol.sh probe-gogc$g-$i 10000 4s -- env GOGC=$g /tmp/probegate-base13 -config /tmp/idle13/cfg-probe.yaml; fi
 done
 ./ol.sh nginx-$i 10000 4s -- $NG
done
./up2.sh stop
echo "end $(date -u +%T) $(uptime)"
