#!/bin/bash
# direct.sh: a third raw upstream on the target port (no proxy): the floor the generator and upstreams set
exec env PROBEGATE_BENCH_RAW_UPSTREAM=127.0.0.1:18280 /tmp/gen11/bench
