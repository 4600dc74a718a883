#!/bin/bash
# issue 13 goal cells after the session's picker change (pod_speed_fresh), then the epoll spike's quiet hold.
cd /work/main
while ! grep -q '^rc=' /tmp/ov14/bench.log; do sleep 5; done
uptime > /tmp/g14/uptime.lognormal.before
flock /work/.bench.lock bash bench/results/2026-12-02-s11/gen/scripts/boosted.sh /tmp/bench14 -scenario steady,replicas -sizes lognormal -variants steady_80,replicas_r1 -strategies round_robin,cached,probe,oracle -seeds 3 -duration 15s -no-progress -out /tmp/g14/lognormal > /tmp/g14/lognormal.log 2>&1
uptime > /tmp/g14/uptime.lognormal.after
flock /work/.bench.lock bash bench/results/2026-12-02-s11/gen/scripts/boosted.sh /tmp/bench14 -scenario trace -variants trace_hetero_r1,trace_hetero_r8 -strategies least_inflight,cached,probe,oracle -seeds 3 -duration 15s -trace ../shared/traces/azure_code_2023.csv -no-progress -out /tmp/g14/trace_hetero > /tmp/g14/trace.log 2>&1
uptime > /tmp/g14/uptime.trace.after
echo goals-done > /tmp/g14/done
cd /tmp/ep14 && uptime > /tmp/g14/uptime.epoll.before && TARGETS="nginx pg pgnew spikeraw spikeprod" VEG=1 flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash hold.sh 5 > /tmp/g14/epoll-hold6.log 2>&1
uptime > /tmp/g14/uptime.epoll.after
echo all-done >> /tmp/g14/done
