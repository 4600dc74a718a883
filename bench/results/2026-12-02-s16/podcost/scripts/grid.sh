#!/bin/bash
# Usage: grid.sh BIN OUTDIR CELL SEEDS STRATEGIES
# CELL: n8r1 | n8r8 | n64r8 | n64r32 | n1024r32. Small cells 300 s simulated, the
# 1,024-pod cell the headline's 60 s. Runs at idle priority; appends
# uptime before and after to OUTDIR/uptime.log.
set -e
BIN=$1 OUT=$2 CELL=$3 SEEDS=$4 STRATS=$5
case $CELL in
n8r1) P=8 R=1 D=300s ;;
n8r8) P=8 R=8 D=300s ;;
n64r8) P=64 R=8 D=300s ;;
n64r32) P=64 R=32 D=300s ;;
n1024r32) P=1024 R=32 D=60s ;;
*) echo "unknown cell $CELL" >&2; exit 2 ;;
esac
mkdir -p "$OUT/$CELL"
for s in $SEEDS; do
  d="$OUT/$CELL/s$s"
  echo "$CELL seed $s start $(uptime)" >> "$OUT/uptime.log"
  chrt -i 0 nice -n 19 "$BIN" -pods $P -replicas $R -loads 0.8 -duration $D -seed $s \
    -strategies "$STRATS" -headline 0 -crossover=false -out "$d" > "$d.log" 2>&1
  echo "$CELL seed $s end $(uptime)" >> "$OUT/uptime.log"
done
