#!/bin/bash
# hold1: GOMAXPROCS 1 vs 2 for probegate (pg-base = 5f506f9), least_inflight and probe, under wrk and vegeta 5k/10k; nginx and direct beside; 3 rounds, order reversed every other round
cd /tmp/tk
echo "start $(date -u +%T) $(uptime)"
./up.sh start
run() { local t=$1 l=$2; case $t in
  direct) ./m.sh direct $l 4 -- - ;;
  nginx) ./m.sh nginx $l 4 -- /usr/sbin/nginx -p /tmp/tk/ng -e /tmp/tk/ng/error.log -c /tmp/tk/nginx.conf ;;
  li2) ./m.sh li_gmp2 $l 4 -- ./pg-base -config cfg-li.yaml ;;
  li1) ./m.sh li_gmp1 $l 4 -- env GOMAXPROCS=1 ./pg-base -config cfg-li.yaml ;;
  pr2) ./m.sh probe_gmp2 $l 4 -- ./pg-base -config cfg-probe.yaml ;;
  pr1) ./m.sh probe_gmp1 $l 4 -- env GOMAXPROCS=1 ./pg-base -config cfg-probe.yaml ;;
  esac; }
order="direct nginx li2 li1 pr2 pr1"
for r in 1 2 3; do
  o=$order; [ $((r%2)) = 0 ] && o=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)"
  for l in wrk 5000 10000; do for t in $o; do [ $t = direct ] && [ $l = wrk ] && continue; run $t $l; done; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
