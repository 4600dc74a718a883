#!/bin/bash
# hold 6: idle-stream memory, revert vs new (pool buffers 4 KiB) vs new3 (pool buffers sized to the request), 2 rounds
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
/tmp/s6f/idlestreams -n 9900 -rounds 2 /tmp/s6f/pg-revert /tmp/s6f/pg-new /tmp/s6f/pg-new3
echo "end $(date -u +%T) $(uptime)"
