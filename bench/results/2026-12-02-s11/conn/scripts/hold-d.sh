#!/bin/bash
# hold-d.sh N: BenchmarkAccept (route/listen_linux_test.go), its two listeners alternated N times, 5000 connections each, one process each
cd /tmp
echo "start $(date -u +%T) $(uptime)"
for i in $(seq ${1:-8}); do
for l in net.Listen route.Listen; do
/tmp/conn11/route.test -test.run XXX -test.bench "BenchmarkAccept/$l\$" -test.benchtime 5000x -test.cpu 2 | grep Benchmark
done; done
echo "end $(date -u +%T) $(uptime)"
