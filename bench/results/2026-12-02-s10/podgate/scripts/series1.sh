#!/bin/bash
T=/work/shared/traces/azure_code_2023.csv
B=/tmp/podgate/bench
C="-scenario trace -duration 20s -trace $T -trace-rows 162 -pod-history 3"
echo "queued h1 $(date -u +%T)"
flock /work/.bench.lock /tmp/podgate/hold.sh $B r8_h1 $C -variants trace_hetero_r8 -strategies probe,probe_podgate8,probe_podseed8,cached -seed 1 -seeds 4 -records /tmp/podgate/live/r8_h1_rec
echo "queued h2 $(date -u +%T)"
flock /work/.bench.lock /tmp/podgate/hold.sh $B r1_h2 $C -variants trace_hetero_r1 -strategies probe,probe_podgate8,probe_podseed8 -seed 1 -seeds 5 -records /tmp/podgate/live/r1_h2_rec
echo "done $(date -u +%T)"
