#!/bin/bash
# starve.sh NHOGS GAP_MS EVERY_MS CMD...: runs CMD at GOMAXPROCS=1, SCHED_IDLE nice 19, in a new
# session whose autogroup is nice $AGNICE (default 0, as any session), beside NHOGS busy loops of
# the same class in that same autogroup (so they do starve CMD). If GAP_MS > 0, CMD's whole process
# group (go test and every test binary it starts) is SIGSTOPped for GAP_MS every EVERY_MS (+-50%).
exec setsid bash -c '
echo ${AGNICE:-0} > /proc/self/autogroup
echo "autogroup: $(cat /proc/self/autogroup)"
n=$1 gap=$2 every=$3; shift 3
set -m
hogs=()
for i in $(seq 1 $n); do chrt -i 0 nice -n 19 sh -c "while :; do :; done" & hogs+=($!); done
GOMAXPROCS=1 chrt -i 0 nice -n 19 "$@" &
pid=$!
fz=
if [ "$gap" -gt 0 ]; then
  (
    while kill -0 $pid 2>/dev/null; do
      j=$(( every/2 + RANDOM % (every+1) ))
      sleep $(awk "BEGIN{print $j/1000}")
      kill -STOP -- -$pid 2>/dev/null || break
      sleep $(awk "BEGIN{print $gap/1000}")
      kill -CONT -- -$pid 2>/dev/null
    done
  ) &
  fz=$!
fi
wait $pid; rc=$?
while kill -0 $pid 2>/dev/null; do wait $pid; rc=$?; done
[ -n "$fz" ] && kill $fz 2>/dev/null
kill -CONT -- -$pid 2>/dev/null
for h in "${hogs[@]}"; do kill $h; done
wait 2>/dev/null
echo "starve: exit $rc"
exit $rc' starve "$@"
