#!/bin/bash
# mut.sh FILE OLD NEW TESTREGEX: apply one mutation, run the test, restore.
f=$1; old=$2; new=$3; re=$4
cp $f /tmp/mut.bak
python3 -c "
import sys; p,o,n=sys.argv[1:4]; s=open(p).read(); assert o in s, 'pattern not found: '+o; open(p,'w').write(s.replace(o,n,1))" "$f" "$old" "$new" || { cp /tmp/mut.bak $f; exit 1; }
out=$(chrt -i 0 nice -n 19 go test -count=1 -timeout 120s -run "$re" . 2>&1 | grep -E "^(--- FAIL|ok|FAIL)" | head -3)
cp /tmp/mut.bak $f
echo "[$re] mutation '$old' -> '$new': $(echo $out | tr '\n' ' ')"
