#!/bin/bash
# hold-a.sh: per keep-alive request, system calls by kind, context switches and wake-ups (perf stat)
# for probegate (base), nginx and a minimal fasthttp proxy (with and without timeouts), wrk -t2 -c64 4 s.
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
for t in base nginx min mint; do
case $t in
base) PERF=1 ./cnt4.sh base 4 64 -- /tmp/probegate-base12 $CFG;;
nginx) PERF=1 ./cnt4.sh nginx 4 64 -- nginx -p /tmp/cpu12/ng -c /tmp/cpu12/nginx.conf;;
min) PERF=1 ./cnt4.sh min 4 64 -- /tmp/cpu12/minproxy;;
mint) PERF=1 ./cnt4.sh mint 4 64 -- /tmp/cpu12/minproxy -timeouts;;
esac
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
