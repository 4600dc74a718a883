#!/bin/bash
B=/tmp/podgate/bench
echo "queued h5 $(date -u +%T)"
flock /work/.bench.lock /tmp/podgate/hold.sh $B rep8_h5 -scenario replicas -variants replicas_r8 -strategies probe,probe_podgate8 -seed 1 -seeds 6 -duration 20s -pod-history 3
echo "queued pick2 $(date -u +%T)"
sed 's#/tmp/podgate/live/pick.out#/tmp/podgate/live/pick2.out#' /tmp/podgate/pick.sh > /tmp/podgate/pick2.sh; chmod +x /tmp/podgate/pick2.sh
flock /work/.bench.lock /tmp/podgate/pick2.sh
echo "done $(date -u +%T)"
