#!/bin/bash
# usage: gcmp.sh BASE NAME [strategy-in-NAME]
cd /tmp/r8; st=${3:-probe}
for w in th tm l80 lh px; do python3 cmp.py g_$1_$w.md g_$2_$w.md | grep "probe -> $st:" | sed "s/^/$w /"; done
