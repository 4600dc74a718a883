#!/bin/bash
# mutate.sh FILE OLD NEW PKG TESTREGEX: replace OLD by NEW in FILE (must match), run the tests, restore FILE
cd /work/wt-seat
cp "$1" /tmp/seat13/mut.bak
python3 -c "
import sys; p,a,b=sys.argv[1:4]; s=open(p).read(); assert a in s, 'no match'; open(p,'w').write(s.replace(a,b))" "$1" "$2" "$3" || exit 1
go test -count=1 -run "$5" "$4" 2>&1 | grep -E "^(---|ok|FAIL|\s+\S+_test.go)" | head -8
cp /tmp/seat13/mut.bak "$1"
