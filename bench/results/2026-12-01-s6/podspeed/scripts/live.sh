#!/bin/bash
# Live holds, issue 13 session 6 (podspeed). One hold per (R, seed half).
cd /tmp/pods/live
T=/work/shared/traces/azure_code_2023.csv
S=probe,probe_learned,cached,least_inflight,oracle
for v in trace_hetero_r1 trace_hetero_r8; do
  for half in 1 4; do
    out=e_${v#trace_hetero_}_s$half
    echo "$(date -u +%T) waiting for lock: $out" >> live.log
    flock /work/.bench.lock bash -c "echo \"\$(date -u +%T) start $out, \$(uptime)\" >> live.log; /tmp/pods/bench_s6 -scenario trace -variants $v -strategies $S -seed $half -seeds 3 -duration 20s -trace $T -no-progress -out $out > $out.stdout 2>&1; echo \"\$(date -u +%T) end $out rc=\$?, \$(uptime)\" >> live.log"
  done
done
