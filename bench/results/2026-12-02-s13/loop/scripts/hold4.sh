#!/bin/bash
# hold4.sh PAIRS: wrk -t2 -c64 -d5s POST, base (/tmp/probegate-base13) and watch (/tmp/pg-watch)
# alternated (order flipped each pair); CPU us/req from /proc/<pid>/stat utime+stime.
cd /tmp/ab13
R=${1:-10}
echo "uptime start: $(uptime)"
set -m
nginx -p /tmp/ab13 -c /tmp/ab13/up.conf & UP=$!
/tmp/probegate-base13 -config pg-a.yaml & A=$!
${NEW:-/tmp/pg-watch} -config pg-b.yaml & B=$!
set +m
sleep 1.5
tck=$(getconf CLK_TCK)
cpu() { awk -v t=$tck '{print ($14+$15)/t}' /proc/$1/stat; }
one() { # name pid port
  c0=$(cpu $2); out=$(wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:$3/v1/completions); c1=$(cpu $2)
  rps=$(echo "$out" | awk '/Requests\/sec/{print $2}'); n=$(echo "$out" | awk '/requests in/{print $1}')
  echo "$1 rps $rps cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$n,1))")"
}
for p in 18231 18232; do wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:$p/v1/completions >/dev/null; done
for i in $(seq $R); do
  if [ $((i%2)) = 1 ]; then one base $A 18231; one watch $B 18232; else one watch $B 18232; one base $A 18231; fi
done
kill $A $B $UP; wait 2>/dev/null
echo "uptime end: $(uptime)"
