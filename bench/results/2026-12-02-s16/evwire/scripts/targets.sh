# targets.sh (session 16 evwire, from session 15's: pg and pgloop are probegate with server.event_loop off and on), sourced by hold.sh (from /tmp/ew16): start_targets starts the upstreams and
# each target named in $TARGETS in its own process group, fills PID[name] and PORT[name] and waits until
# each answers; stop_targets ends them and the upstreams.
declare -A PID PORT
start_targets() {
  ./up.sh start
  mkdir -p /tmp/ew16/ng
  port=18590
  set -m
  for t in $TARGETS; do
    case $t in
    nginx) nginx -p /tmp/ew16/ng -e /tmp/ew16/ng/error.log -c /tmp/ew16/nginx.conf & PORT[$t]=18580;;
    pg) /tmp/ew16/pg -config /tmp/ew16/pg.yaml >/tmp/ew16/pg.log 2>&1 & PORT[$t]=18581;; # server.event_loop off
    pgloop) /tmp/ew16/pg -config /tmp/ew16/pgloop.yaml >/tmp/ew16/pgloop.log 2>&1 & PORT[$t]=18582;; # server.event_loop on (2 loops, GOMAXPROCS 3)
    pgprobe) /tmp/ew16/pg -config /tmp/ew16/pgprobe.yaml >/tmp/ew16/pgprobe.log 2>&1 & PORT[$t]=18583;; # policy probe, key off
    pgprobeloop) /tmp/ew16/pg -config /tmp/ew16/pgprobeloop.yaml >/tmp/ew16/pgprobeloop.log 2>&1 & PORT[$t]=18584;; # policy probe, key on (handed over)
    evloop) /tmp/ew16/lbproxy -listen 127.0.0.1:18590 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 & PORT[$t]=18590;; # internal/evloop as a least-in-flight proxy, GOMAXPROCS 3
    spikeprod) GOMAXPROCS=3 /tmp/ew16/spike -loops 2 -listen 127.0.0.1:18591 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -rawwait -check & PORT[$t]=18591;; # session 14's spike in its production shape
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
