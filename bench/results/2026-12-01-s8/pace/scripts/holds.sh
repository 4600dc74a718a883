#!/bin/bash
# three holds, each its own flock
T=/work/shared/traces/azure_code_2023.csv
B=/tmp/pace/bench_new2
cd /work/wt-pace
hold() { name=$1; shift; echo "== $name start $(date -u +%T) $(uptime)"; flock /work/.bench.lock sh -c "echo \"locked \$(date -u +%T) \$(uptime)\"; $B $* -no-progress -out /tmp/pace/live/$name; echo \"end \$(date -u +%T) \$(uptime)\""; }
hold rep8_c -scenario replicas -variants replicas_r8 -strategies probe,probe_ownpace,cached -seed 7 -seeds 6
hold th8_a -scenario trace -variants trace_hetero_r8 -strategies probe,probe_ownpace,cached -seed 1 -seeds 3 -duration 20s -trace $T
hold r1s80_a -scenario steady,replicas -variants steady_80,replicas_r1 -strategies probe,probe_ownpace,cached -seed 1 -seeds 3
