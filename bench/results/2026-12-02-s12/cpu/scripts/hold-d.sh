#!/bin/bash
# hold-d.sh ROUNDS: probegate (base b5bf8d3), nginx and minproxy alternated (order rotated each round),
# wrk -t2 -c64 4 s each; then EAGAIN reads per request for base and nginx (perf stat, filtered exits).
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
run() { case $1 in
 base) ./cnt4.sh base 4 64 -- /tmp/probegate-base12 $CFG;;
 nginx) ./cnt4.sh nginx 4 64 -- nginx -p /tmp/cpu12/ng -c /tmp/cpu12/nginx.conf;;
 min) ./cnt4.sh min 4 64 -- /tmp/cpu12/minproxy;;
esac; }
for i in $(seq ${1:-5}); do
 case $((i % 3)) in 1) o="base nginx min";; 2) o="nginx min base";; 0) o="min base nginx";; esac
 for t in $o; do run $t; done
done
./eagain.sh base -- /tmp/probegate-base12 $CFG
./eagain.sh nginx -- nginx -p /tmp/cpu12/ng -c /tmp/cpu12/nginx.conf
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
