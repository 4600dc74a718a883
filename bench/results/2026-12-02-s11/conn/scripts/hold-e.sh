#!/bin/bash
# hold-e.sh ROUNDS: ReduceMemoryUsage. pg-ka (main + route.Listen) vs pg-rmu (the same + fasthttp Server.ReduceMemoryUsage), alternated, order swapped each round:
# wrk -t2 -c64 4 s keep-alive and Connection: close; openloop 2000 req/s 4 s; then memory per client connection (memconn.py, 2000 idle keep-alive, 2000 silent)
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/conn11/cfg-least_inflight.yaml"
for i in $(seq ${1:-4}); do
if [ $((i % 2)) = 1 ]; then order="ka rmu"; else order="rmu ka"; fi
for b in $order; do ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b $CFG; done
for b in $order; do CLOSE=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b $CFG; done
for b in $order; do ./ol3.sh $b 2000 4s -- /tmp/conn11/pg-$b $CFG; done
done
for m in idle silent; do for b in ka rmu; do python3 memconn.py $b 2000 $m -- /tmp/conn11/pg-$b $CFG; done; done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
