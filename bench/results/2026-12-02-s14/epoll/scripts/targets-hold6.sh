# targets.sh, sourced by hold.sh and prof.sh (from /tmp/ep14): start_targets starts the upstreams and
# each target named in $TARGETS in its own process group, fills PID[name] and PORT[name] and waits until
# each answers; stop_targets ends them and the upstreams.
declare -A PID PORT
start_targets() {
  ./up.sh start
  mkdir -p /tmp/ep14/ng
  port=18290
  set -m
  for t in $TARGETS; do
    case $t in
    nginx) nginx -p /tmp/ep14/ng -e /tmp/ep14/ng/error.log -c /tmp/ep14/nginx.conf & PORT[$t]=18280;;
    pg) /tmp/ep14/pg -config /tmp/ep14/pg.yaml >/tmp/ep14/pg.log 2>&1 & PORT[$t]=18281;;
    pgnew) /tmp/ep14/pgnew -config /tmp/ep14/pgnew.yaml >/tmp/ep14/pgnew.log 2>&1 & PORT[$t]=18282;; # lead: main 00b7c5c
    spike) /tmp/ep14/spike -listen 127.0.0.1:$port & PORT[$t]=$port;;             # 2 loops, syscall.EpollWait
    spike0) /tmp/ep14/spike -listen 127.0.0.1:$port -poll0 & PORT[$t]=$port;;     # + raw non-blocking wait first
    spikeg3) GOMAXPROCS=3 /tmp/ep14/spike -loops 2 -listen 127.0.0.1:$port & PORT[$t]=$port;; # a spare P
    spikeraw) /tmp/ep14/spike -listen 127.0.0.1:$port -rawwait & PORT[$t]=$port;; # raw blocking wait
    spikechk) /tmp/ep14/spike -listen 127.0.0.1:$port -rawwait -check & PORT[$t]=$port;; # + the guard's peek before a reuse
    spikeprod) GOMAXPROCS=3 /tmp/ep14/spike -loops 2 -listen 127.0.0.1:$port -rawwait -check & PORT[$t]=$port;; # the sketch's shape: a spare P, raw waits, the peek
    esac
    PID[$t]=$!; port=$((port+1))
  done
  set +m
  for t in $TARGETS; do for i in $(seq 50); do curl -s -o /dev/null -XPOST 127.0.0.1:${PORT[$t]}/v1/completions -d '{}' && break; sleep 0.1; done; done
}
stop_targets() {
  for t in $TARGETS; do kill ${PID[$t]}; done; wait 2>/dev/null
  ./up.sh stop
}
