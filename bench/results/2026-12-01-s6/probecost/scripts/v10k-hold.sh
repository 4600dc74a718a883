#!/bin/bash
# 3 rounds at 10k req/s, 5 s each, order reversed every other round: direct, nginx, probegate probe, probe with GOMAXPROCS=1, least_inflight
cd /tmp/pc
echo "start $(date -u +%T) $(uptime)"
./up.sh start
run() { case $1 in
  direct) ./v10k.sh direct 10000 5 -- - ;;
  nginx) ./v10k.sh nginx 10000 5 -- /usr/sbin/nginx -p /tmp/pc/ng -e /tmp/pc/ng/error.log -c /tmp/pc/nginx.conf ;;
  probe) ./v10k.sh probe 10000 5 -- /tmp/pc/pg-new -config /tmp/pc/cfg-probe.yaml ;;
  probe_gmp1) ./v10k.sh probe_gmp1 10000 5 -- /tmp/pc/pg-new-gmp1 -config /tmp/pc/cfg-probe.yaml ;;
  li) ./v10k.sh least_inflight 10000 5 -- /tmp/pc/pg-new -config /tmp/pc/cfg.yaml ;;
  esac; }
order="direct nginx probe probe_gmp1 li"
for r in 1 2 3; do
  o=$order; [ $((r%2)) = 0 ] && o=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
  for t in $o; do run $t; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
