#!/bin/bash
cd /work/wt-idle/route
uptime
for bin in /tmp/route-base9.test /tmp/route-idle9b.test; do
	name=$(basename $bin .test)
	$bin -test.run '^$' -test.bench 'BenchmarkForwardLarge/sse' -test.benchtime 150x -test.cpuprofile /tmp/idle9-prof-$name.pprof > /dev/null
done
uptime
