#!/bin/bash
# prof.sh: perf record -g of each target in TARGETS (default nginx spikeraw) for 4 s under
# wrk -t2 -c64 -d6s POST (recording starts 1 s in); self time by symbol and inclusive shares of the
# main kernel paths, per request. Run under the lock and boost like hold.sh.
cd /tmp/ep14
TARGETS=${TARGETS:-"nginx spikeraw"}
echo "uptime start: $(date -u +%T) $(uptime)"
. ./targets.sh
start_targets
for t in $TARGETS; do
  wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions >/dev/null
  pids=$(pgrep -g ${PID[$t]} | paste -sd,)
  (sleep 1; perf record -q -F 1999 -g -p $pids -o /tmp/ep14/prof-$t.data -- sleep 4 2>/dev/null) & pr=$!
  out=$(wrk -t2 -c64 -d6s -s post.lua http://127.0.0.1:${PORT[$t]}/v1/completions); wait $pr
  echo "$t: $(echo "$out" | awk '/Requests\/sec/{print "wrk req/s", $2}')"
done
stop_targets
echo "uptime end: $(date -u +%T) $(uptime)"
for t in $TARGETS; do
  perf report -i /tmp/ep14/prof-$t.data --no-children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > /tmp/ep14/prof-$t.self.txt
  perf report -i /tmp/ep14/prof-$t.data --children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -80 > /tmp/ep14/prof-$t.children.txt
  echo "== $t samples: $(perf report -i /tmp/ep14/prof-$t.data --stdio 2>/dev/null | awk '/^# Samples/{print $3}' | head -1)"
done
