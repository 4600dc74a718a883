#!/bin/bash
# msse.sh NAME DUR -- CMD...: start CMD (proxy on 18080 in front of the paced SSE upstreams), run sseload DUR s, print frames and proxy CPU us/frame, cs/frame
name=$1; dur=$2; shift 3
setsid "$@" > /tmp/s5/$name.log 2>&1 &
pid=$!
sleep 0.5
/tmp/s5/sseload-bin -proxy 127.0.0.1:18080 -c 32 -d 1s >/dev/null
tck=$(getconf CLK_TCK)
gcpu() { awk '{print $14+$15}' /proc/$pid/stat; }
gcs() { cat /proc/$pid/task/*/status 2>/dev/null | awk '/^voluntary_ctxt/{v+=$2} /^nonvoluntary_ctxt/{n+=$2} END{print v, n}'; }
c0=$(gcpu); read v0 n0 < <(gcs)
n=$(/tmp/s5/sseload-bin -proxy 127.0.0.1:18080 -c 64 -d ${dur}s -frames 50 -gap 2ms)
c1=$(gcpu); read v1 n1 < <(gcs)
echo "$name frames=$n cpu_us_per_frame=$(echo "scale=2; ($c1-$c0)*1000000/$tck/$n" | bc) vcs/frame=$(echo "scale=3; ($v1-$v0)/$n" | bc) ivcs/frame=$(echo "scale=3; ($n1-$n0)/$n" | bc)"
kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sleep 0.3
