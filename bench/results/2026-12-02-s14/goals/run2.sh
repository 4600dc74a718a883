#!/bin/bash
cd /work/main
while pgrep -f "bench14 -scenario steady,replicas" > /dev/null; do sleep 5; done
uptime > /tmp/g14/uptime.lognormal.after
flock /work/.bench.lock bash bench/results/2026-12-02-s11/gen/scripts/boosted.sh /tmp/bench14 -scenario trace -variants trace_hetero_r1,trace_hetero_r8 -strategies least_inflight,cached,probe,oracle -seeds 3 -duration 15s -trace ../shared/traces/azure_code_2023.csv -no-progress -out /tmp/g14/trace_hetero > /tmp/g14/trace.log 2>&1
uptime > /tmp/g14/uptime.trace.after
echo goals-done > /tmp/g14/done
cd /tmp/ep14 && uptime > /tmp/g14/uptime.epoll.before && TARGETS="nginx pg pgnew spikeraw spikeprod" VEG=1 flock /work/.bench.lock bash /work/main/bench/results/2026-12-02-s11/gen/scripts/boosted.sh bash hold.sh 5 > /tmp/g14/epoll-hold6.log 2>&1
uptime > /tmp/g14/uptime.epoll.after
echo all-done >> /tmp/g14/done
