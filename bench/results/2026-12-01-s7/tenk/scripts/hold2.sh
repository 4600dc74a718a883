#!/bin/bash
# hold2: with the session-7 bench's generator (openloop, lean) and raw epoll upstreams: probegate probe and least_inflight (5f506f9) GOMAXPROCS 2 vs 1, nginx and direct, at 10k, 4 s each, 3 rounds, order reversed every other round
cd /tmp/tk
echo "start $(date -u +%T) $(uptime)"
UPENV=PROBEGATE_BENCH_RAW_UPSTREAM UPBIN=/tmp/tk/bench-raw ./up.sh start
run() { case $1 in
  direct) ./m2.sh direct 10000 4 -- - ;;
  nginx) ./m2.sh nginx 10000 4 -- /usr/sbin/nginx -p /tmp/tk/ng -e /tmp/tk/ng/error.log -c /tmp/tk/nginx.conf ;;
  li2) ./m2.sh li_gmp2 10000 4 -- ./pg-base -config cfg-li.yaml ;;
  li1) ./m2.sh li_gmp1 10000 4 -- env GOMAXPROCS=1 ./pg-base -config cfg-li.yaml ;;
  pr2) ./m2.sh probe_gmp2 10000 4 -- ./pg-base -config cfg-probe.yaml ;;
  pr1) ./m2.sh probe_gmp1 10000 4 -- env GOMAXPROCS=1 ./pg-base -config cfg-probe.yaml ;;
  esac; }
order="direct nginx li2 li1 pr2 pr1"
for r in 1 2 3; do
  o=$order; [ $((r%2)) = 0 ] && o=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)"
  for t in $o; do run $t; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
