#!/bin/bash
# hold 5: idle-stream memory, revert vs new, alternating, 2 rounds each (bench/cmd/idlestreams)
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
/tmp/s6f/idlestreams -n 9900 -rounds 2 /tmp/s6f/pg-revert /tmp/s6f/pg-new
echo "end $(date -u +%T) $(uptime)"
