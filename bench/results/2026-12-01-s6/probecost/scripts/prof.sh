#!/bin/bash
# prof.sh BIN TAG: under wrk -t2 -c64, for least_inflight and probe: CPU profile (4 s) + allocs profile, then m.sh-like CPU/req and perf stat.
BIN=$1; TAG=$2
cd /tmp/pc
for pol in least_inflight probe; do
  cfg=cfg.yaml; [ $pol = probe ] && cfg=cfg-probe.yaml
  setsid $BIN -config $cfg > /tmp/pc/$TAG-$pol.log 2>&1 & pid=$!
  for i in $(seq 50); do curl -s -o /dev/null -XPOST localhost:18080/v1/completions -d '{}' && break; sleep 0.1; done
  wrk -t2 -c64 -d1s -s post.lua http://127.0.0.1:18080/v1/completions >/dev/null
  curl -s -o /tmp/pc/$TAG-$pol.cpu.pprof "http://127.0.0.1:18081/debug/pprof/profile?seconds=4" &
  cp=$!
  curl -s -o /tmp/pc/$TAG-$pol.allocs0.pprof "http://127.0.0.1:18081/debug/pprof/allocs"
  wrk -t2 -c64 -d5s --latency -s post.lua http://127.0.0.1:18080/v1/completions | grep -E 'Requests/sec|requests in'
  curl -s -o /tmp/pc/$TAG-$pol.allocs1.pprof "http://127.0.0.1:18081/debug/pprof/allocs"
  wait $cp
  kill -9 -- -$pid; wait $pid 2>/dev/null; sleep 0.3
done
