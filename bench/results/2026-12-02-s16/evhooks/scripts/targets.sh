# targets.sh (session 16 evhooks; session 15 loop's shape), sourced by hold.sh from /tmp/evh16:
# start_targets starts the upstreams and each target in $TARGETS in its own process group, fills
# PID[name] and PORT[name] and waits until each answers; stop_targets ends them and the upstreams.
#   evold: session 15's lbproxy built at fe2fe81 (internal/evloop before this session)
#   evnew: the same lbproxy source built at this session's commit (internal/evloop with the hooks)
#   evpark: lbpark at this session's commit: every request parked and resumed by a worker goroutine
#   evparkny: lbpark built with the loop's runtime.Gosched after a turn with a park removed (gobench.sh)
declare -A PID PORT
start_targets() {
  ./up.sh start
  mkdir -p /tmp/evh16/ng
  set -m
  for t in $TARGETS; do
    case $t in
    nginx) nginx -p /tmp/evh16/ng -e /tmp/evh16/ng/error.log -c /tmp/evh16/nginx.conf & PORT[$t]=18580;;
    evold) /tmp/evh16/lbold -listen 127.0.0.1:18590 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 & PORT[$t]=18590;;
    evnew) /tmp/evh16/lbnew -listen 127.0.0.1:18591 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 & PORT[$t]=18591;;
    evparkny) /tmp/evh16/lbpark-noyield -listen 127.0.0.1:18593 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 -workers 2 & PORT[$t]=18593;;
    evpark) /tmp/evh16/lbpark -listen 127.0.0.1:18592 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 -workers 2 & PORT[$t]=18592;;
    esac
    PID[$t]=$!
  done
  set +m
  for t in $TARGETS; do for i in $(seq 50); do curl -s -o /dev/null -XPOST 127.0.0.1:${PORT[$t]}/v1/completions -d '{}' && break; sleep 0.1; done; done
}
stop_targets() {
  for t in $TARGETS; do kill ${PID[$t]}; done; wait 2>/dev/null
  ./up.sh stop
}
