#!/bin/bash
# hold.sh ROUNDS (session 16 evwire, from session 15's; default targets nginx pg pgloop): the targets in TARGETS (default "nginx pg evloop"; see
# targets.sh), all idle at once; per round each target in turn, the order rotated every round and reversed
# every other: wrk -t2 -c64 -d8s --latency POST. CPU us/req = utime+stime of the target's process group
# (/proc/PID/stat; nginx: master and workers) over the run / requests. Run from /tmp/ew16 under:
#   flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash hold.sh N
cd /tmp/ew16
R=${1:-5}
TARGETS=${TARGETS:-"nginx pg pgloop"}
echo "uptime start: $(date -u +%T) $(uptime)"
. ./targets.sh
start_targets
tck=$(getconf CLK_TCK)
gcpu() { local s=0; for p in $(pgrep -g $1); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; printf "%.2f", v}'; }
onewrk() { # name
  local p=${PID[$1]} port=${PORT[$1]}
  c0=$(gcpu $p); out=$(wrk -t2 -c64 -d8s --latency -s post.lua http://127.0.0.1:$port/v1/completions); c1=$(gcpu $p)
  n=$(echo "$out" | awk '/requests in/{print $1}')
  err=$(echo "$out" | awk '/Non-2xx|Socket errors/{printf "%s ", $0}')
  echo "wrk $1 rps $(echo "$out" | awk '/Requests\/sec/{print $2}') p50 $(echo "$out" | awk '$1=="50%"{print $2}' | ms) p99 $(echo "$out" | awk '$1=="99%"{print $2}' | ms) cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$tck/$n,1))") n $n load $(cut -d' ' -f1 /proc/loadavg) ${err:+errors: $err}"
}
for t in $TARGETS; do wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions >/dev/null; done
for i in $(seq $R); do
  echo "round $i $(date -u +%T)"
  order=$(python3 -c "import sys; t=sys.argv[1].split(); r=int(sys.argv[2]); o=t[r%len(t):]+t[:r%len(t)]; print(' '.join(o if r%2==0 else o[::-1]))" "$TARGETS" $i)
  for t in $order; do onewrk $t; done
done
stop_targets
echo "uptime end: $(date -u +%T) $(uptime)"
