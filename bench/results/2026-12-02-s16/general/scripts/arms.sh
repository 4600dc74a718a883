#!/bin/bash
# arms.sh BIN TAG LIFE SET ARM...: the sweep SET (A, B: sweeps.sh's; C, D: sweeps_new.sh's) with /tmp/gen16/fleetsim.$BIN, pods' age LIFE,
# strategies round_robin,random,least_inflight,cached,probe and each ARM (a probe variant, e.g. probe+sg=1), judged: the first ARM.
# Both arms run in one invocation: same seeds, same rivals. Output /tmp/gen16/arm_${TAG}_${LIFE}_$SET.
T=/work/shared/traces/azure_code_2023.csv
bin=$1 tag=$2 life=$3 set=$4; shift 4
arms=$(IFS=,; echo "$*")
cd /tmp/gen16
o=arm_${tag}_${life}_$set
S="-strategies round_robin,random,least_inflight,cached,probe,$arms -probe $1"
uptime > $o.uptime
case $set in
A) chrt -i 0 nice -n 19 ./fleetsim.$bin -general -out $o -trace $T -sizes uniform,lognormal_s05,lognormal_s15,bimodal,trace_sizes,trace_arrivals \
     -arrivals poisson,onoff,ramp -fleets homo,oneslow,twospeed,smallkv -pods 16 -replicas 1,8 -loads 0.8 -lives $life -parallel 2 $S > $o.log 2>&1 ;;
B) chrt -i 0 nice -n 19 ./fleetsim.$bin -general -out $o -trace $T -sizes lognormal,bimodal,trace_sizes -arrivals poisson,onoff \
     -fleets homo,oneslow,twospeed,smallkv -pods 4,16,64 -replicas 1,8 -loads 0.3,0.6,0.8,0.95 -lives $life -parallel 2 $S > $o.log 2>&1 ;;
C) chrt -i 0 nice -n 19 ./fleetsim.$bin -general -out $o -sizes decode_heavy,fixed -arrivals poisson,onoff,ramp -fleets homo,oneslow,twospeed,smallkv \
     -pods 4,16,64 -replicas 1,8 -loads 0.6,0.8 -lives $life -parallel 2 $S > $o.log 2>&1 ;;
D) chrt -i 0 nice -n 19 ./fleetsim.$bin -general -out $o -trace $T -sizes lognormal,bimodal,decode_heavy,trace_sizes -arrivals poisson,onoff \
     -fleets homo,oneslow,twospeed,smallkv -pods 16 -seats 16 -replicas 1,8 -loads 0.6,0.9 -lives $life -parallel 2 $S > $o.log 2>&1 ;;
esac
uptime >> $o.uptime
