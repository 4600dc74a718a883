#!/bin/bash
cd /work/wt-idle/route
S=../bench/results/2026-12-01-s9/idle/scripts
date -u; uptime
/tmp/idlestreams9 -n 9900 -rounds 3 /tmp/probegate-base9 /tmp/probegate-idle9b > /tmp/idle9-run2/idlestreams.txt 2>&1
date -u; uptime
$S/bcpu.sh 5 /tmp/route-base9.test /tmp/route-idle9b.test /tmp/idle9-run2/bcpu
date -u; uptime
$S/bfwd.sh 3 /tmp/route-base9.test /tmp/route-idle9b.test /tmp/idle9-run2/bfwd
date -u; uptime
