#!/bin/bash
# starved.sh SECS LOG NHOGS GAP_MS EVERY_MS CMD...: runs session 12's starve.sh NHOGS GAP_MS
# EVERY_MS CMD... (CMD at GOMAXPROCS=1, SCHED_IDLE nice 19 beside NHOGS busy loops; with
# GAP_MS > 0 its process group SIGSTOPped GAP_MS every EVERY_MS +-50%), appending to LOG, and
# kills starve.sh's whole session (its busy loops included, by session id) after SECS seconds
# if it has not ended by then. Run it under flock /work/.bench.lock: the deadline then counts
# only time holding the lock.
secs=$1 log=$2; shift 2
S=/work/wt-flaky/bench/results/2026-12-02-s12/flaky7/scripts/starve.sh
echo "== $(date -u +%T) starve $* | $(uptime)" >> "$log"
bash $S "$@" >> "$log" 2>&1 &
pid=$! # starve.sh execs setsid in place: its pid is its session id
( sleep "$secs"; echo "== deadline: killing session $pid" >> "$log"; pkill -KILL -s $pid ) &
w=$!
wait $pid; rc=$?
kill $w 2>/dev/null; wait $w 2>/dev/null
pkill -KILL -s $pid 2>/dev/null
echo "== end rc=$rc $(date -u +%T) | $(uptime)" >> "$log"
