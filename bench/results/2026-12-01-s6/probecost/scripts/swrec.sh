#!/bin/bash
# swrec.sh BIN TAG CFG: perf record -e sched:sched_switch -g for 3 s under wrk
BIN=$1; TAG=$2; CFG=$3
setsid $BIN -config $CFG > /tmp/pc/$TAG.log 2>&1 & pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -e sched:sched_switch -g -p $pid -o /tmp/pc/$TAG.sw.data -- sleep 3 >/dev/null 2>&1 &
pr=$!
wrk -t2 -c64 -d4s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E 'requests in' | tr '\n' ' '; echo $TAG
wait $pr
kill -9 -- -$pid; wait $pid 2>/dev/null; sleep 0.3
