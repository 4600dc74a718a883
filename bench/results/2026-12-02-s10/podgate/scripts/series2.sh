#!/bin/bash
T=/work/shared/traces/azure_code_2023.csv
B=/tmp/podgate/bench
C="-scenario trace -duration 20s -trace $T -trace-rows 162 -pod-history 3"
echo "queued pick $(date -u +%T)"; flock /work/.bench.lock /tmp/podgate/pick.sh
echo "queued h3 $(date -u +%T)"
flock /work/.bench.lock /tmp/podgate/hold.sh $B r8_h3 $C -variants trace_hetero_r8 -strategies probe,probe_podgate8 -seed 5 -seeds 8
echo "queued h4 $(date -u +%T)"
flock /work/.bench.lock /tmp/podgate/hold.sh $B r8_h4 $C -variants trace_hetero_r8 -strategies probe,probe_podgate8 -seed 13 -seeds 8
echo "done $(date -u +%T)"
