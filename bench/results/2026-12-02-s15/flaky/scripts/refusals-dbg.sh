#!/bin/bash
# refusals-dbg.sh LOGDIR BIN COUNT: TestRefusalsCountedUnderNone -test.count COUNT under starved.sh
# 1 2500 6000, with a route test binary BIN built from a temporary edit (not committed) that
# prints "DBG release/waitReadable false/releaseIdle close <client addr>" to stderr in
# Proxy.releaseIdle. Under flock /work/.bench.lock.
logs=$1 bin=$2 count=$3
D=$(cd "$(dirname "$0")" && pwd)
cd /work/wt-flaky/route
bash $D/starved.sh 400 $logs/refusals-dbg.log 1 2500 6000 $bin -test.v -test.count $count -test.timeout 390s -test.run '^TestRefusalsCountedUnderNone$'
