#!/bin/bash
# m2.sh (m.sh with the bench's generator: openloop, lean transport) NAME LOAD DUR -- CMD...: start CMD (a proxy on 19080; CMD "-" = direct to upstream 19001),
# warm up 1 s, then load it for DUR s: LOAD "wrk" (wrk -t2 -c64, closed loop) or a rate (vegeta CLI,
# the bench's settings: -workers 64 -max-workers 512 -keepalive -http2=false).
# Prints achieved req/s, p50/p99 ms, target CPU us/req and run-queue wait us/req (schedstat),
# cores of target / generator / upstreams / other / busy, and perf stat counts per request of the target.
name=$1; load=$2; dur=$3; shift 4
url=http://127.0.0.1:19080/v1/completions
pid=
if [ "$1" != "-" ]; then
  setsid "$@" > /tmp/tk/logs/$name.log 2>&1 & pid=$!
  for i in $(seq 50); do curl -s -o /dev/null -XPOST $url -d '{}' && break; sleep 0.1; done
else url=http://127.0.0.1:19001/v1/completions; fi
printf "POST $url\nContent-Type: application/json\n@/tmp/tk/body.json\n" > /tmp/tk/targets.txt
VEG="${VEGENV} /tmp/tk/vegeta attack -targets /tmp/tk/targets.txt -keepalive -http2=false -workers 64 -max-workers 512"
if [ $load = wrk ]; then wrk -t2 -c64 -d1s -s /tmp/tk/post.lua $url >/dev/null; else /tmp/tk/openloop -rate ${load} -duration 1s $url > /dev/null; fi
sched() { local r=0 w=0; for p in "$@"; do for f in /proc/$p/task/*/schedstat; do read a b c < $f 2>/dev/null && r=$((r+a)) && w=$((w+b)); done; done; echo $r $w; }
ups="$(cat /tmp/tk/up19001.pid) $(cat /tmp/tk/up19002.pid)"
tp=""; [ -n "$pid" ] && tp=$(pgrep -g $pid | tr '\n' ' ')
read m0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
read t0r t0w < <(sched $tp); read u0r u0w < <(sched $ups)
if [ -n "$pid" ]; then
  perf stat -x, -e task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_nanosleep,syscalls:sys_enter_read,syscalls:sys_enter_write -p $(echo $tp | tr ' ' ,) -o /tmp/tk/logs/$name.perfstat -- sleep $dur & ps=$!
fi
t_start=$(date +%s%N)
if [ $load = wrk ]; then
  out=$(wrk -t2 -c64 -d${dur}s --latency -s /tmp/tk/post.lua $url)
  n=$(echo "$out" | awk '/requests in/{print $1}')
  rate=$(echo "$out" | awk '/Requests\/sec/{print $2}')
  p50=$(echo "$out" | awk '$1=="50%"{print $2}'); p99=$(echo "$out" | awk '$1=="99%"{print $2}')
  gen=$(pgrep -x wrk)  # gone by now
  gencores=-
else
  /tmp/tk/openloop -rate ${load} -duration ${dur}s $url > /dev/shm/tk-v.json & vp=$!
  sleep 0.2; read v0r v0w < <(sched $vp)
  while kill -0 $vp 2>/dev/null; do read v1r v1w < <(sched $vp); sleep 0.1; done
  wait $vp
  read n rate p50 p99 ok < <(python3 -c 'import sys,json; r=json.load(open("/dev/shm/tk-v.json")); print(r["requests"], round(r["achieved_rps"]), r["latency_ms"]["p50"], r["latency_ms"]["p99"], r["success"])')
  rm -f /dev/shm/tk-v.json
fi
t_end=$(date +%s%N)
[ -n "$pid" ] && wait $ps
read m1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
[ -n "$pid" ] && tp=$(pgrep -g $pid | tr '\n' ' ')
read t1r t1w < <(sched $tp); read u1r u1w < <(sched $ups)
python3 - "$name" "$load" "$n" "$rate" "$p50" "$p99" $t_start $t_end $m0 $m1 ${t0r:-0} ${t0w:-0} ${t1r:-0} ${t1w:-0} ${u0r:-0} ${u1r:-0} ${v0r:-0} ${v1r:-0} /tmp/tk/logs/$name.perfstat <<'PY'
import sys,os
name,load,n,rate,p50,p99=sys.argv[1:7]
ts,te,m0,m1,t0r,t0w,t1r,t1w,u0r,u1r,v0r,v1r=map(int,sys.argv[7:19])
ps=sys.argv[19]
n=int(n); wall=(te-ts)/1e9; busy=(m1-m0)/100/wall
tc=(t1r-t0r)/1e9/wall; uc=(u1r-u0r)/1e9/wall; vc=(v1r-v0r)/1e9/wall
line=f"{name:16s} {load:>5s} req/s {float(rate):7.0f} p50 {p50:>7s} p99 {p99:>8s} | cpu {(t1r-t0r)/1e3/n:6.1f} us/req wait {(t1w-t0w)/1e3/n:6.1f} | cores t {tc:.2f} gen {vc:.2f} up {uc:.2f} other {max(0,busy-tc-uc-vc):.2f} busy {busy:.2f}"
if os.path.exists(ps) and tc>0:
  d={}
  for l in open(ps):
    f=l.strip().split(',')
    if len(f)>3 and f[0] and f[0][0].isdigit(): d[f[2].split(':')[-1]]=float(f[0])
  k={'context-switches':'cs','cpu-migrations':'mig','sys_enter':'sys','sys_enter_futex':'futex','sys_enter_epoll_pwait':'epoll','sys_enter_nanosleep':'nsleep','sys_enter_read':'read','sys_enter_write':'write'}
  line+=" | per req: "+" ".join(f"{k[x]} {d[x]/n:.2f}" for x in k if x in d)
print(line)
PY
[ -n "$pid" ] && { kill -9 -- -$pid; wait $pid 2>/dev/null; }
sleep 0.3
