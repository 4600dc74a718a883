#!/bin/bash
cd /work/main
while ! grep -q '^rc=' /tmp/ci13.log; do sleep 5; done
uptime > /tmp/g13/uptime.lognormal.before
flock /work/.bench.lock bash bench/results/2026-12-02-s11/gen/scripts/boosted.sh /tmp/bench13 -scenario steady,replicas -sizes lognormal -variants steady_80,replicas_r1 -strategies round_robin,cached,probe,oracle -seeds 3 -duration 15s -no-progress -out /tmp/g13/lognormal > /tmp/g13/lognormal.log 2>&1
uptime > /tmp/g13/uptime.lognormal.after
flock /work/.bench.lock bash bench/results/2026-12-02-s11/gen/scripts/boosted.sh /tmp/bench13 -scenario trace -variants trace_hetero_r1,trace_hetero_r8 -strategies least_inflight,cached,probe,oracle -seeds 3 -duration 15s -trace ../shared/traces/azure_code_2023.csv -no-progress -out /tmp/g13/trace_hetero > /tmp/g13/trace.log 2>&1
uptime > /tmp/g13/uptime.trace.after
echo done > /tmp/g13/done
