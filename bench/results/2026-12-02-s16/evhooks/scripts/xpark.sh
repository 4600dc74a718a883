#!/bin/bash
# xpark.sh (session 16 evhooks): the instrumented park benchmark (scripts/parkexp_linux_test.go.txt:
# Route starts a goroutine that calls Resume; medians of Route -> goroutine start and goroutine ->
# Resumed) with the loop's yield (xyield.test, HEAD) and without (xnoyield.test), alternated, 3 rounds,
# GOMAXPROCS 1, 2, 3. Run from /tmp/evh16 under the lock and boost.
cd /tmp/evh16
echo "uptime start: $(date -u +%T) $(uptime)"
for i in 1 2 3; do for t in xyield xnoyield; do echo "== $t round $i"; ./$t.test -test.run xxx -test.bench XGo -test.benchtime 1000x -test.cpu 1,2,3 | grep -E 'Benchmark|median'; done; done
echo "uptime end: $(date -u +%T) $(uptime)"
