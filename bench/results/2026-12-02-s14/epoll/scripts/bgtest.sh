#!/bin/bash
# bgtest.sh: what the loops leave to the rest of the process. Each variant of the spike runs with
# -bg 50ms (a timer goroutine forcing runtime.GC every 50 ms) under wrk -t2 -c64 -d6s POST; on SIGTERM
# it prints the timer's lateness and each GC's duration. Variants: raw2 (-rawwait, GOMAXPROCS=2 = loops),
# raw3 (-rawwait, GOMAXPROCS=3, 2 loops: a spare P), sys2 (syscall.EpollWait, GOMAXPROCS=2).
# Run under the lock and boost like hold.sh.
cd /tmp/ep14
echo "uptime start: $(date -u +%T) $(uptime)"
./up.sh start
tck=$(getconf CLK_TCK)
for v in "raw2 2 -rawwait" "raw3 3 -rawwait" "sys2 2" "raw2 2 -rawwait" "raw3 3 -rawwait" "sys2 2"; do
  set -- $v; name=$1; gmp=$2; shift 2
  GOMAXPROCS=$gmp /tmp/ep14/spike.bg -loops 2 -listen 127.0.0.1:18295 -bg 50ms "$@" 2>/tmp/ep14/bg-$name.err & pid=$!
  sleep 0.5
  c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:18295/v1/completions)
  c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  n=$(echo "$out" | awk '/requests in/{print $1}')
  kill -TERM $pid; wait $pid
  echo "$name rps $(echo "$out" | awk '/Requests\/sec/{print $2}') cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$tck/$n,1))") $(cat /tmp/ep14/bg-$name.err)"
done
./up.sh stop
echo "uptime end: $(date -u +%T) $(uptime)"
