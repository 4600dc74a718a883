#!/bin/bash
# hold3.sh ROUNDS: wrk -t2 -c64 -d5s POST against base (/tmp/probegate-base13), watch (/tmp/pg-watch)
# and nocheck (/tmp/pg-proto PG_PROTO_NOCHECK=1: no stray check, unsafe), rotated; CPU us/req from
# /proc/<pid>/stat utime+stime; with PERF=1, then perf stat syscalls per request for each.
cd /tmp/ab13
R=${1:-6}
echo "uptime start: $(uptime)"
set -m
nginx -p /tmp/ab13 -c /tmp/ab13/up.conf & UP=$!
/tmp/probegate-base13 -config pg-a.yaml & A=$!
${NEW:-/tmp/pg-watch} -config pg-b.yaml & B=$!
PG_PROTO_NOCHECK=1 /tmp/pg-proto -config pg-c.yaml & C=$!
set +m
sleep 1.5
tck=$(getconf CLK_TCK)
cpu() { awk -v t=$tck '{print ($14+$15)/t}' /proc/$1/stat; }
one() { # name pid port
  c0=$(cpu $2); out=$(wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:$3/v1/completions); c1=$(cpu $2)
  rps=$(echo "$out" | awk '/Requests\/sec/{print $2}'); n=$(echo "$out" | awk '/requests in/{print $1}')
  echo "$1 rps $rps cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$n,1))")"
}
for p in 18231 18232 18233; do wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:$p/v1/completions >/dev/null; done
for i in $(seq $R); do
  case $((i%3)) in
  1) one base $A 18231; one watch $B 18232; one nocheck $C 18233;;
  2) one watch $B 18232; one nocheck $C 18233; one base $A 18231;;
  0) one nocheck $C 18233; one base $A 18231; one watch $B 18232;;
  esac
done
if [ -n "$PERF" ]; then
for v in "base $A 18231" "watch $B 18232" "nocheck $C 18233"; do
  set -- $v
  perf stat -x, -e raw_syscalls:sys_enter -e syscalls:sys_exit_read --filter 'ret == -11' -e syscalls:sys_exit_read --filter 'ret > 0' -e syscalls:sys_enter_write -e syscalls:sys_enter_epoll_pwait -e context-switches -p $2 -o perf-$1.txt -- sleep 3 & sp=$!
  out=$(wrk -t2 -c64 -d3s -s post.lua http://127.0.0.1:$3/v1/completions); wait $sp
  n=$(echo "$out" | awk '/requests in/{print $1}')
  awk -F, -v n=$n -v name=$1 'BEGIN{split("syscalls read:EAGAIN read:data write epoll_pwait cswitch",L," ")} $1 ~ /^[0-9]+$/ {i++; printf "%s %s %.3f/req\n", name, L[i], $1/n}' perf-$1.txt
done
fi
kill $A $B $C $UP; wait 2>/dev/null
echo "uptime end: $(uptime)"
