#!/bin/bash
# mutate.sh FILE OLD NEW PKG TESTREGEX: replace OLD by NEW in FILE (must match once), run the tests at idle priority, restore FILE
cd /work/wt-general
cp "$1" /tmp/gen16/mut.bak
python3 -c "
import sys; p,a,b=sys.argv[1:4]; s=open(p).read(); assert s.count(a)==1, 'no single match'; open(p,'w').write(s.replace(a,b))" "$1" "$2" "$3" || exit 1
chrt -i 0 nice -n 19 go test -count=1 -run "$5" "$4" 2>&1 | grep -E "^(---|ok|FAIL|\s+\S+_test.go)" | head -8
cp /tmp/gen16/mut.bak "$1"
