#!/bin/bash
# v10k.sh NAME RATE DUR -- CMD...: start CMD (a proxy on 18080; "direct" when CMD is -), then
# vegeta attack at RATE for DUR s (the bench's settings: 64..512 workers, keep-alive, HTTP/1.1),
# and print achieved rate, p50/p99, and where the CPU went: cores of the target, of vegeta,
# of the two upstreams, of everything else, machine busy; run-queue wait per request of target and vegeta.
name=$1; rate=$2; dur=$3; shift 4
url=http://127.0.0.1:18080/v1/completions
pid=
if [ "$1" != "-" ]; then
  setsid "$@" > /tmp/pc/$name.log 2>&1 & pid=$!
  for i in $(seq 50); do curl -s -o /dev/null -XPOST $url -d '{}' && break; sleep 0.1; done
else url=http://127.0.0.1:18001/v1/completions; fi
printf "POST $url\nContent-Type: application/json\n@/tmp/pc/body.json\n" > /tmp/pc/targets.txt
# warm-up 1 s at the rate
/tmp/pc/vegeta attack -targets /tmp/pc/targets.txt -rate ${rate}/s -duration 1s -keepalive -http2=false -workers 64 -max-workers 512 > /dev/null
sched() { # sum of schedstat run and wait (ns) over the threads of the given pids
  local r=0 w=0; for p in "$@"; do for f in /proc/$p/task/*/schedstat; do read a b c < $f 2>/dev/null && r=$((r+a)) && w=$((w+b)); done; done; echo $r $w; }
pgpids() { pgrep -g $1 | tr '\n' ' '; }
ups="$(cat /tmp/pc/up1.pid) $(cat /tmp/pc/up2.pid)"
tp=""; [ -n "$pid" ] && tp=$(pgpids $pid)
read m0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
read t0r t0w < <(sched $tp); read u0r u0w < <(sched $ups)
/tmp/pc/vegeta attack -targets /tmp/pc/targets.txt -rate ${rate}/s -duration ${dur}s -keepalive -http2=false -workers 64 -max-workers 512 -output /dev/shm/pc-v.bin &
vp=$!
sleep 0.2; read v0r v0w < <(sched $vp)
t_start=$(date +%s%N)
# sample vegeta's schedstat just before it exits
while kill -0 $vp 2>/dev/null; do read v1r v1w < <(sched $vp); sleep 0.1; done
wait $vp
t_end=$(date +%s%N)
read m1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
[ -n "$pid" ] && tp=$(pgpids $pid)
read t1r t1w < <(sched $tp); read u1r u1w < <(sched $ups)
rep=$(/tmp/pc/vegeta report -type json /dev/shm/pc-v.bin)
python3 - "$name" "$rate" "$rep" $t_start $t_end $m0 $m1 ${t0r:-0} ${t0w:-0} ${t1r:-0} ${t1w:-0} ${u0r:-0} ${u1r:-0} ${v0r:-0} ${v0w:-0} ${v1r:-0} ${v1w:-0} <<'PY'
import sys,json
name,rate,rep=sys.argv[1],sys.argv[2],json.loads(sys.argv[3])
ts,te,m0,m1,t0r,t0w,t1r,t1w,u0r,u1r,v0r,v0w,v1r,v1w=map(int,sys.argv[4:])
n=rep['requests']; wall=(te-ts)/1e9
busy=(m1-m0)/100/wall
tc=(t1r-t0r)/1e9/wall; uc=(u1r-u0r)/1e9/wall; vc=(v1r-v0r)/1e9/wall
print(f"{name:14s} rate {rate} sent {rep['rate']:7.0f} ok {rep['success']:.3f} p50 {rep['latencies']['50th']/1e6:7.2f} p99 {rep['latencies']['99th']/1e6:7.2f} ms | cores target {tc:.2f} vegeta {vc:.2f} upstreams {uc:.2f} other {max(0,busy-tc-uc-vc):.2f} busy {busy:.2f} | us/req target {(t1r-t0r)/1e3/n:.1f} vegeta {(v1r-v0r)/1e3/n:.1f} | rq-wait us/req target {(t1w-t0w)/1e3/n:.1f} vegeta {(v1w-v0w)/1e3/n:.1f}")
PY
[ -n "$pid" ] && { kill -9 -- -$pid; wait $pid 2>/dev/null; }
rm -f /dev/shm/pc-v.bin
sleep 0.3
