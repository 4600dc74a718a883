#!/bin/bash
# prec.sh TAG LOAD -- CMD: start CMD (proxy on 19080), warm 1 s, perf record -g (user+kernel) of its pids for 4 s under LOAD (wrk or a vegeta rate)
tag=$1; load=$2; shift 3
url=http://127.0.0.1:19080/v1/completions
setsid "$@" > /tmp/tk/logs/$tag.log 2>&1 & pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST $url -d '{}' && break; sleep 0.1; done
printf "POST $url\nContent-Type: application/json\n@/tmp/tk/body.json\n" > /tmp/tk/targets.txt
VEG="/tmp/tk/vegeta attack -targets /tmp/tk/targets.txt -keepalive -http2=false -workers 64 -max-workers 512"
if [ $load = wrk ]; then (wrk -t2 -c64 -d6s -s /tmp/tk/post.lua $url > /tmp/tk/logs/$tag.load); else ($VEG -rate ${load}/s -duration 6s | /tmp/tk/vegeta report > /tmp/tk/logs/$tag.load); fi & lp=$!
sleep 1
perf record -F 2999 -g -p $(pgrep -g $pid | paste -sd,) -o /tmp/tk/logs/$tag.perf.data -- sleep 4 2>/dev/null
wait $lp
kill -9 -- -$pid; wait $pid 2>/dev/null
