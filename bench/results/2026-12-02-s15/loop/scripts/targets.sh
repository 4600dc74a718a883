# targets.sh (session 15, from session 14's), sourced by hold.sh (from /tmp/lp15): start_targets starts the upstreams and
# each target named in $TARGETS in its own process group, fills PID[name] and PORT[name] and waits until
# each answers; stop_targets ends them and the upstreams.
declare -A PID PORT
start_targets() {
  ./up.sh start
  mkdir -p /tmp/lp15/ng
  port=18590
  set -m
  for t in $TARGETS; do
    case $t in
    nginx) nginx -p /tmp/lp15/ng -e /tmp/lp15/ng/error.log -c /tmp/lp15/nginx.conf & PORT[$t]=18580;;
    pg) /tmp/lp15/pg -config /tmp/lp15/pg.yaml >/tmp/lp15/pg.log 2>&1 & PORT[$t]=18581;;
    evloop) /tmp/lp15/lbproxy -listen 127.0.0.1:18590 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 & PORT[$t]=18590;; # internal/evloop as a least-in-flight proxy, GOMAXPROCS 3
    spikeprod) GOMAXPROCS=3 /tmp/lp15/spike -loops 2 -listen 127.0.0.1:18591 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -rawwait -check & PORT[$t]=18591;; # session 14's spike in its production shape
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
