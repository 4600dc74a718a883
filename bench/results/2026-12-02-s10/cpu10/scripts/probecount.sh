#!/bin/bash
# probecount.sh BIN: probe policy under wrk -t2 -c64 5 s; probe/request counters from /metrics before and after
cd /tmp/c10
bin=$1
./up.sh start
setsid $bin -config /tmp/c10/cfg-probe.yaml > /tmp/c10/pc.log 2>&1 & pid=$!
sleep 0.5; wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
curl -s http://127.0.0.1:18081/metrics | grep -E "^probegate_(probes_total|requests_total|scrapes|upstream_conn|upstream_dial)" > /tmp/c10/pc0.txt
wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:18080/v1/completions | grep -E "Requests/sec|requests in"
curl -s http://127.0.0.1:18081/metrics | grep -E "^probegate_(probes_total|requests_total|scrapes|upstream_conn|upstream_dial)" > /tmp/c10/pc1.txt
diff pc0.txt pc1.txt
kill -9 -- -$pid; wait $pid 2>/dev/null
./up.sh stop
