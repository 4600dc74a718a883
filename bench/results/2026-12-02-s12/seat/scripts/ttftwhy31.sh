#!/bin/bash
# ttftwhy31.sh: the bench's fleetsim cells on 30 more windows / seeds (31-60), session-start binary and final
T=/work/shared/traces/azure_code_2023.csv
cd /tmp/seat && mkdir -p tw31
for v in base final; do
  uptime > tw31/${v}.uptime
  chrt -i 0 nice -n 19 ./ttftwhy.$v -trace $T -rate 8.1 -duration 20s -warmup 0s -seeds 30 -first-seed 31 -replicas 1,8 -pod-history 3 \
     -strategies probe,cached,oracle_sim > tw31/${v}_trace_h3.md 2> tw31/${v}_trace_h3.log
  chrt -i 0 nice -n 19 ./ttftwhy.$v -workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 20s -seeds 30 -first-seed 31 -replicas 1 \
     -strategies probe,cached,round_robin > tw31/${v}_steady80.md 2> tw31/${v}_steady80.log
  chrt -i 0 nice -n 19 ./ttftwhy.$v -workload lognormal -pods 8 -slowdown 1 -rate 19.1 -duration 20s -seeds 30 -first-seed 31 -replicas 1 \
     -strategies probe,cached,round_robin > tw31/${v}_replicas_r1.md 2> tw31/${v}_replicas_r1.log
  uptime >> tw31/${v}.uptime
done
