#!/bin/bash
# sweeps.sh V...: session 12's sweeps (seat/scripts/sweeps.sh, A and B) and the bimodal on-off sweep with /tmp/seat13/fleetsim.$V
T=/work/shared/traces/azure_code_2023.csv
cd /tmp/seat13
for v in "$@"; do
  uptime > bim_$v.uptime
  chrt -i 0 nice -n 19 ./fleetsim.$v -general -out bim_$v -sizes bimodal -arrivals onoff -parallel 2 > bim_$v.log 2>&1
  uptime >> bim_$v.uptime
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
