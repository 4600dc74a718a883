#!/bin/bash
# gen.sh NAME RATE DUR -- GENCMD...: run a generator command (it gets URL appended) against direct (upstream 19001) and print
# its CPU per request (schedstat of its threads, sampled until it exits), the upstreams' cores, the machine's, and p50/p99 from its JSON output
name=$1; rate=$2; dur=$3; shift 4
url=http://127.0.0.1:${PORT:-19001}/v1/completions
sched() { local r=0 w=0; for p in "$@"; do for f in /proc/$p/task/*/schedstat; do read a b c < $f 2>/dev/null && r=$((r+a)) && w=$((w+b)); done; done; echo $r $w; }
ups="$(cat /tmp/tk/up19001.pid) $(cat /tmp/tk/up19002.pid)"
read m0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat); read u0r u0w < <(sched $ups)
ts=$(date +%s%N)
perf stat -x, -e task-clock -o /tmp/tk/logs/gen.stat -- "$@" $url > /tmp/tk/logs/gen.out
te=$(date +%s%N)
g1=$(awk -F, '/task-clock/{printf "%.0f", $1*1e6}' /tmp/tk/logs/gen.stat)
read m1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat); read u1r u1w < <(sched $ups)
python3 - $name $rate $ts $te $m0 $m1 $u0r $u1r $g1 /tmp/tk/logs/gen.out <<'PY'
import sys,json
name,rate=sys.argv[1:3]; ts,te,m0,m1,u0,u1,g=map(int,sys.argv[3:10]); out=open(sys.argv[10]).read()
try:
  j=json.loads(out.strip().splitlines()[-1]); n=j.get('requests') or 0; ach=j.get('achieved_rps') or j.get('rate'); p50=j['latency_ms']['p50'] if 'latency_ms' in j else j['latencies']['50th']/1e6; p99=j['latency_ms']['p99'] if 'latency_ms' in j else j['latencies']['99th']/1e6
except Exception as e:
  print(name, 'parse error', e, out[:200]); sys.exit()
wall=(te-ts)/1e9
print(f"{name:12s} {rate:>6s} achieved {ach:7.0f} p50 {p50:6.2f} p99 {p99:7.2f} ms | gen cpu {g/1e3/n:5.1f} us/req (whole process) {g/1e9/wall:.2f} cores | up cores {(u1-u0)/1e9/wall:.2f} | busy {(m1-m0)/100/wall:.2f}")
PY
