#!/bin/bash
# hold2.sh: profboth.sh, then bfwd.sh 5, then alt3.sh 5 5 base8 c1 c2 (one hold)
cd /tmp/s8f
./profboth.sh
./bfwd.sh 5
./alt3.sh 5 5 /tmp/s8f/pg-base8 /tmp/s8f/pg-c1 /tmp/s8f/pg-c2
