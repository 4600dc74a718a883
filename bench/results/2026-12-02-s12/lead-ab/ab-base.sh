#!/bin/bash
# ab.sh ROUNDS POLICY: wrk -t2 -c64 -d5s against new and base probegate, alternated; CPU us/req from /proc
cd /tmp/ab12
R=${1:-6}; POL=${2:-least_inflight}
sed -i "s/policy: .*/policy: $POL/" pg-new.yaml pg-base.yaml
nginx -p /tmp/ab12 -c /tmp/ab12/up.conf & UP=$!
/tmp/probegate-new12 -config pg-new.yaml & N=$!
/tmp/probegate-base12 -config pg-base.yaml & B=$!
sleep 1.5
tck=$(getconf CLK_TCK)
cpu() { awk -v t=$tck '{print ($14+$15)/t}' /proc/$1/stat; }
one() { # name pid port
  c0=$(cpu $2); out=$(wrk -t2 -c64 -d5s -s post.lua http://127.0.0.1:$3/v1/completions); c1=$(cpu $2)
  rps=$(echo "$out" | awk '/Requests\/sec/{print $2}'); n=$(echo "$out" | awk '/requests in/{print $1}')
  echo "$1 rps $rps cpu_us_req $(python3 -c "print(round(($c1-$c0)*1e6/$n,1))")"
}
for p in 18201 18202; do wrk -t2 -c64 -d2s -s post.lua http://127.0.0.1:$p/v1/completions >/dev/null; done
for i in $(seq $R); do
  if [ $((i%2)) = 1 ]; then one new $N 18201; one base $B 18202; else one base $B 18202; one new $N 18201; fi
done
kill $N $B; kill $UP; wait 2>/dev/null
