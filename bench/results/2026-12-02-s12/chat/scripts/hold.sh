#!/bin/bash
# hold.sh OUT FLEET VARIANT [more bench flags]: one live cell of the bimodal/onoff
# comparison (3 seeds, six policies, 18 s = 3 on-off periods, long-lived pods), with
# the machine's load before and after in OUT/uptime.txt. Run it under the lock in a
# boosted session:
#   flock /work/.bench.lock bash .../gen/scripts/boosted.sh bash scripts/hold.sh OUT FLEET VARIANT
set -e
out=$1 fleet=$2 variant=$3
shift 3
B=${BENCH:-/tmp/chat/bench}
mkdir -p "$out"
echo "start $(date -u +%FT%TZ) $(uptime) bench=$B $(cat /proc/self/autogroup)" >>"$out/uptime.txt"
"$B" -scenario replicas -variants "$variant" -sizes bimodal -arrivals onoff -fleet "$fleet" \
  -strategies round_robin,random,least_inflight,cached,probe,oracle -seeds 3 -duration 18s \
  -pod-history 1 -no-progress -out "$out" "$@" 2>&1 | tee -a "$out/log.txt"
echo "end $(date -u +%FT%TZ) $(uptime)" >>"$out/uptime.txt"
