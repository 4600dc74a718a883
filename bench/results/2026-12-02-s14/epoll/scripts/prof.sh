#!/bin/bash
# prof.sh: perf record -g of each target in TARGETS (default nginx spikeraw) for 4 s under
# wrk -t2 -c64 -d6s POST (recording starts 1 s in); self time by symbol and inclusive shares of the
# main kernel paths, per request. Run under the lock and boost like hold.sh.
cd /tmp/ep14
TARGETS=${TARGETS:-"nginx spikeraw"}
echo "uptime start: $(date -u +%T) $(uptime)"
./up.sh start
mkdir -p /tmp/ep14/ng
declare -A PID PORT
port=18290
set -m
for t in $TARGETS; do
  case $t in
  nginx) nginx -p /tmp/ep14/ng -e /tmp/ep14/ng/error.log -c /tmp/ep14/nginx.conf & PORT[$t]=18280;;
  pg) /tmp/ep14/pg -config /tmp/ep14/pg.yaml >/tmp/ep14/pg.log 2>&1 & PORT[$t]=18281;;
  spike) /tmp/ep14/spike -listen 127.0.0.1:$port & PORT[$t]=$port;;
  spikeraw) /tmp/ep14/spike -listen 127.0.0.1:$port -rawwait & PORT[$t]=$port;;
  spikechk) /tmp/ep14/spike -listen 127.0.0.1:$port -rawwait -check & PORT[$t]=$port;;
  esac
  PID[$t]=$!; port=$((port+1))
done
set +m
for t in $TARGETS; do for i in $(seq 50); do curl -s -o /dev/null -XPOST 127.0.0.1:${PORT[$t]}/v1/completions -d '{}' && break; sleep 0.1; done; done
for t in $TARGETS; do
  wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions >/dev/null
  pids=$(pgrep -g ${PID[$t]} | paste -sd,)
  (sleep 1; perf record -q -F 1999 -g -p $pids -o /tmp/ep14/prof-$t.data -- sleep 4 2>/dev/null) & pr=$!
  out=$(wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions); wait $pr
  echo "$t: $(echo "$out" | awk '/Requests\/sec/{print "wrk req/s", $2}')"
done
for t in $TARGETS; do kill ${PID[$t]}; done; wait 2>/dev/null
./up.sh stop
echo "uptime end: $(date -u +%T) $(uptime)"
for t in $TARGETS; do
  perf report -i /tmp/ep14/prof-$t.data --no-children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > /tmp/ep14/prof-$t.self.txt
  perf report -i /tmp/ep14/prof-$t.data --children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -80 > /tmp/ep14/prof-$t.children.txt
  echo "== $t samples: $(perf report -i /tmp/ep14/prof-$t.data --stdio 2>/dev/null | awk '/^# Samples/{print $3}' | head -1)"
done
