#!/bin/bash
# sweeps.sh: sweep A and B (session 11 general's commands) with the session-start binary and with the new one
T=/work/shared/traces/azure_code_2023.csv
cd /tmp/seat
for v in base new; do
  for s in A B; do
    uptime > sw_${v}_$s.uptime
    if [ $s = A ]; then
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out sw_${v}_A -trace $T -sizes uniform,lognormal_s05,lognormal_s15,bimodal,trace_sizes,trace_arrivals \
        -arrivals poisson,onoff,ramp -fleets homo,oneslow,twospeed,smallkv -pods 16 -replicas 1,8 -loads 0.8 -lives long -parallel 2 > sw_${v}_A.log 2>&1
    else
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out sw_${v}_B -trace $T -sizes lognormal,bimodal,trace_sizes -arrivals poisson,onoff \
        -fleets homo,oneslow,twospeed,smallkv -pods 4,16,64 -replicas 1,8 -loads 0.3,0.6,0.8,0.95 -lives long -parallel 2 > sw_${v}_B.log 2>&1
    fi
    uptime >> sw_${v}_$s.uptime
  done
done
