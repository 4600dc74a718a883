#!/bin/bash
# hold5: N rounds (order rotated each round) of m2.sh 4 s: base10 li, base10 li GOMAXPROCS=1, nginx, base10 probe, new probe
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"; ./up.sh start
NG="nginx -p /tmp/c10/ng -e /tmp/c10/ng/logs/error.log -c /tmp/c10/nginx.conf"
A=(li li_gmp1 nginx probe_base probe_new)
run() { case $1 in
 li) ./m2.sh li 4 -- /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml;;
 li_gmp1) ./m2.sh li_gmp1 4 -- env GOMAXPROCS=1 /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml;;
 nginx) ./m2.sh nginx 4 -- $NG;;
 probe_base) ./m2.sh probe_base 4 -- /tmp/probegate-base10 -config /tmp/c10/cfg-probe.yaml;;
 probe_new) ./m2.sh probe_new 4 -- /tmp/c10/pg-new -config /tmp/c10/cfg-probe.yaml;;
esac; }
for i in $(seq $1); do
 if [ $((i%2)) = 1 ]; then order="${A[*]}"; else order=$(echo ${A[*]} | tr ' ' '\n' | tac | tr '\n' ' '); fi
 for t in $order; do run $t; done
done
./up.sh stop; echo "end $(date -u +%T) $(uptime)"
