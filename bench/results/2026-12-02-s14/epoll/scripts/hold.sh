#!/bin/bash
# hold.sh ROUNDS: the targets named in TARGETS (default nginx pg spike spike0; see targets.sh:
# nginx 2 workers least_conn keepalive, probegate least_inflight main fb54b15, spike variants), all idle at once; per round each target in turn
# (order rotated every round): wrk -t2 -c64 -d8s --latency POST, then vegeta 10k req/s for 3 s after an
# unmeasured 1 s at 10k on the same keep-alive connections. CPU us/req = utime+stime of the target's
# process group (/proc/PID/stat) over the run / requests. PERF=1: perf stat system calls per request
# during a 3 s wrk, per target. Run under: flock /work/.bench.lock bash .../boosted.sh bash hold.sh N
cd /tmp/ep14
R=${1:-3}
TARGETS=${TARGETS:-"nginx pg spike spike0"}
echo "uptime start: $(date -u +%T) $(uptime) autogroup=$(cat /proc/self/autogroup)"
. ./targets.sh
start_targets
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $1); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; printf "%.2f", v}'; }
target() { printf 'POST http://127.0.0.1:%s/v1/completions\nContent-Type: application/json\n@/tmp/ep14/body.json\n' $1; }
onewrk() { # name
  local p=${PID[$1]} port=${PORT[$1]}
  c0=$(gcpu $p); out=$(wrk -t2 -c64 -d8s --latency -s post.lua http://127.0.0.1:$port/v1/completions); c1=$(gcpu $p)
  n=$(echo "$out" | awk '/requests in/{print $1}')
  echo "wrk $1 rps $(echo "$out" | awk '/Requests\/sec/{print $2}') p50 $(echo "$out" | awk '$1=="50%"{print $2}' | ms) p99 $(echo "$out" | awk '$1=="99%"{print $2}' | ms) cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$tck/$n,1))") n $n load $(cut -d' ' -f1 /proc/loadavg)"
}
oneveg() { # name
  local p=${PID[$1]} port=${PORT[$1]}
  target $port | ./vegeta attack -rate 10000/s -duration 1s -keepalive -http2=false -max-workers 512 > /dev/null
  c0=$(gcpu $p)
  target $port | ./vegeta attack -rate 10000/s -duration 3s -keepalive -http2=false -max-workers 512 > /tmp/ep14/veg.bin
  c1=$(gcpu $p)
  ./vegeta report -type=json < /tmp/ep14/veg.bin | python3 -c '
import json,sys
d=json.load(sys.stdin); L=d["latencies"]; n=d["requests"]; c0,c1,tck=float(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4])
print("veg10k %s achieved %.0f p50 %.2f p99 %.2f succ %.4f cpu_us_req %.1f n %d" % (sys.argv[1], d["throughput"], L["50th"]/1e6, L["99th"]/1e6, d["success"], (c1-c0)*1e6/tck/n, n))' $1 $c0 $c1 $tck
}
for t in $TARGETS; do wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions >/dev/null; done
set -- $TARGETS; k=$#
for i in $(seq $R); do
  echo "round $i $(date -u +%T)"
  order=$(python3 -c "import sys; t=sys.argv[1].split(); r=int(sys.argv[2]); o=t[r%len(t):]+t[:r%len(t)]; print(' '.join(o if r%2==0 else o[::-1]))" "$TARGETS" $i)
  for t in $order; do onewrk $t; oneveg $t; done
done
if [ -n "$PERF" ]; then
for t in $TARGETS; do
  pids=$(pgrep -g ${PID[$t]} | paste -sd,)
  perf stat -x, -e raw_syscalls:sys_enter -e syscalls:sys_enter_read -e syscalls:sys_exit_read --filter 'ret == -11' -e syscalls:sys_enter_write -e syscalls:sys_enter_readv -e syscalls:sys_enter_writev -e syscalls:sys_enter_recvfrom -e syscalls:sys_enter_sendto -e syscalls:sys_enter_epoll_wait -e syscalls:sys_enter_epoll_pwait -e syscalls:sys_enter_epoll_ctl -e syscalls:sys_enter_futex -e syscalls:sys_enter_nanosleep -e syscalls:sys_enter_getsockopt -e context-switches -p $pids -o /tmp/ep14/perf-$t.txt -- sleep 3 & sp=$!
  if [ -n "$VEG" ]; then
    target ${PORT[$t]} | ./vegeta attack -rate 10000/s -duration 3s -keepalive -http2=false -max-workers 512 > /tmp/ep14/vegp.bin; wait $sp
    n=$(./vegeta report -type=json < /tmp/ep14/vegp.bin | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
  else
    out=$(wrk -t2 -c64 -d3s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions); wait $sp
    n=$(echo "$out" | awk '/requests in/{print $1}')
  fi
  awk -F, -v n=$n -v name=$t -v tag=${VEG:+veg} '$1 ~ /^[0-9]+$/ {ev=$3; if ($3 ~ /read/ && prev ~ /sys_enter_read/ ) ev="read_EAGAIN"; prev=$3; printf "perf%s %s %s %.3f/req\n", tag, name, ev, $1/n}' /tmp/ep14/perf-$t.txt
done
fi
stop_targets
echo "uptime end: $(date -u +%T) $(uptime)"
