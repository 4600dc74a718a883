#!/bin/bash
# sweeps_new.sh LIFE V...: the new axes of this session with /tmp/gen16/fleetsim.$V, pods' age LIFE:
#   C: the two new size distributions (decode_heavy, fixed), every arrival process and fleet, 4-64 pods, R 1 and 8, loads 0.6 and 0.8 (288 cells)
#   D: 16-seat pods (-seats 16): four size distributions, Poisson and on-off, every fleet, 16 pods, R 1 and 8, loads 0.6 and 0.9 (128 cells)
T=/work/shared/traces/azure_code_2023.csv
life=$1; shift
cd /tmp/gen16
for v in "$@"; do
  for s in C D; do
    o=sw_${v}_${life}_$s
    uptime > $o.uptime
    if [ $s = C ]; then
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out $o -sizes decode_heavy,fixed -arrivals poisson,onoff,ramp -fleets homo,oneslow,twospeed,smallkv \
        -pods 4,16,64 -replicas 1,8 -loads 0.6,0.8 -lives $life -parallel 2 > $o.log 2>&1
    else
      chrt -i 0 nice -n 19 ./fleetsim.$v -general -out $o -trace $T -sizes lognormal,bimodal,decode_heavy,trace_sizes -arrivals poisson,onoff \
        -fleets homo,oneslow,twospeed,smallkv -pods 16 -seats 16 -replicas 1,8 -loads 0.6,0.9 -lives $life -parallel 2 > $o.log 2>&1
    fi
    uptime >> $o.uptime
  done
done
