#!/bin/bash
# sweeps.sh LIFE V...: session 13's whole sweep (A and B, 672 distinct cells) with /tmp/gen16/fleetsim.$V,
# pods' age LIFE (long or fresh), at idle priority, 2 simulations at once. Outputs /tmp/gen16/sw_${V}_${LIFE}_{A,B}.
T=/work/shared/traces/azure_code_2023.csv
life=$1; shift
cd /tmp/gen16
for v in "$@"; do
  for s in A B; do
    o=sw_${v}_${life}_$s
    uptime > $o.uptime
    if [ $s = A ]; then
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out $o -trace $T -sizes uniform,lognormal_s05,lognormal_s15,bimodal,trace_sizes,trace_arrivals \
        -arrivals poisson,onoff,ramp -fleets homo,oneslow,twospeed,smallkv -pods 16 -replicas 1,8 -loads 0.8 -lives $life -parallel 2 > $o.log 2>&1
    else
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out $o -trace $T -sizes lognormal,bimodal,trace_sizes -arrivals poisson,onoff \
        -fleets homo,oneslow,twospeed,smallkv -pods 4,16,64 -replicas 1,8 -loads 0.3,0.6,0.8,0.95 -lives $life -parallel 2 > $o.log 2>&1
    fi
    uptime >> $o.uptime
  done
done
