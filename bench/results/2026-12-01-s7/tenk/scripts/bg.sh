#!/bin/bash
# bg.sh: direct at 2k and 10k (openloop, lean) with no background of mine, with 2 busy loops at nice 19, and with 2 busy loops under SCHED_IDLE (chrt -i 0); 2 rounds
cd /tmp/tk; ./up.sh start
spin() { for i in 1 2; do setsid $1 bash -c 'while :; do :; done' & echo $! >> /tmp/tk/spin.pids; done; sleep 0.3; }
unspin() { kill $(cat /tmp/tk/spin.pids) 2>/dev/null; rm -f /tmp/tk/spin.pids; sleep 0.3; }
for r in 1 2; do
  for mode in none nice idle; do
    case $mode in nice) spin "nice -n 19";; idle) spin "chrt -i 0";; esac
    for rate in 2000 10000; do ./gen.sh bg-$mode $rate x -- ./openloop -rate $rate -duration 3s; done
    unspin
  done
done
./up.sh stop
