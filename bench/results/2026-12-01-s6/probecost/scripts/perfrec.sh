#!/bin/bash
# perfrec.sh BIN TAG POLICY: perf record -F 1999 -g on the proxy for 4 s under wrk -t2 -c64 (5 s); prints req/s
BIN=$1; TAG=$2; pol=$3
cd /tmp/pc
cfg=cfg.yaml; [ $pol = probe ] && cfg=cfg-probe.yaml
setsid $BIN -config $cfg > /tmp/pc/$TAG-$pol.log 2>&1 & pid=$!
for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
perf record -F 1999 -g -p $pid -o /tmp/pc/$TAG-$pol.perf.data -- sleep 4 >/dev/null 2>&1 &
pr=$!
wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E 'Requests/sec|requests in' | tr '\n' ' '; echo " $TAG $pol"
wait $pr
curl -s http://127.0.0.1:18081/metrics | grep -E '^probegate_probes_total|^probegate_requests_total' | head -20 > /tmp/pc/$TAG-$pol.metrics
kill -9 -- -$pid; wait $pid 2>/dev/null; sleep 0.3
