#!/bin/bash
# alt.sh N DUR CFG A_NAME A_BIN B_NAME B_BIN: N alternating pairs (order flipped every other pair) of m.sh
n=$1; dur=$2; cfg=$3; an=$4; ab=$5; bn=$6; bb=$7
for i in $(seq $n); do
  if [ $((i%2)) = 1 ]; then ./m.sh $an $dur -- $ab -config $cfg; ./m.sh $bn $dur -- $bb -config $cfg
  else ./m.sh $bn $dur -- $bb -config $cfg; ./m.sh $an $dur -- $ab -config $cfg; fi
done
