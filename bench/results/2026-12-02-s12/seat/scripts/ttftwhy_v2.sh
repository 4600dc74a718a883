#!/bin/bash
# ttftwhy_v2.sh: the bench's fleetsim cells with the landed build (v2), windows/seeds 1-30 (tw/) and 31-60 (tw31/)
T=/work/shared/traces/azure_code_2023.csv
cd /tmp/seat
for first in 1 31; do
  d=tw; [ $first = 31 ] && d=tw31
  uptime > $d/v2.uptime
  chrt -i 0 nice -n 19 ./ttftwhy.v2 -trace $T -rate 8.1 -duration 20s -warmup 0s -seeds 30 -first-seed $first -replicas 1,8 -pod-history 3 \
     -strategies probe,cached,least_inflight,oracle_sim > $d/v2_trace_h3.md 2> $d/v2_trace_h3.log
  chrt -i 0 nice -n 19 ./ttftwhy.v2 -workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 20s -seeds 30 -first-seed $first -replicas 1 \
     -strategies probe,cached,round_robin > $d/v2_steady80.md 2> $d/v2_steady80.log
  chrt -i 0 nice -n 19 ./ttftwhy.v2 -workload lognormal -pods 8 -slowdown 1 -rate 19.1 -duration 20s -seeds 30 -first-seed $first -replicas 1 \
     -strategies probe,cached,round_robin > $d/v2_replicas_r1.md 2> $d/v2_replicas_r1.log
  uptime >> $d/v2.uptime
done
