#!/bin/bash
# ttftwhy.sh: the bench's own fleetsim cells, session-start binary (base) and new, 30 windows / seeds each
T=/work/shared/traces/azure_code_2023.csv
cd /tmp/seat && mkdir -p tw
for v in base new; do
  uptime > tw/${v}.uptime
  chrt -i 0 nice -n 19 ./ttftwhy.$v -trace $T -rate 8.1 -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history 3 \
     -strategies probe,cached,least_inflight,oracle_sim > tw/${v}_trace_h3.md 2> tw/${v}_trace_h3.log
  chrt -i 0 nice -n 19 ./ttftwhy.$v -workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 20s -seeds 30 -replicas 1 \
     -strategies probe,cached,round_robin > tw/${v}_steady80.md 2> tw/${v}_steady80.log
  chrt -i 0 nice -n 19 ./ttftwhy.$v -workload lognormal -pods 8 -slowdown 1 -rate 19.1 -duration 20s -seeds 30 -replicas 1 \
     -strategies probe,cached,round_robin > tw/${v}_replicas_r1.md 2> tw/${v}_replicas_r1.log
  uptime >> tw/${v}.uptime
done
