#!/bin/bash
# mut.sh FILE OLD NEW TESTREGEX: apply one mutation to FILE (run from route/),
# run the tests matching TESTREGEX, restore FILE. (Session 15's mut.sh with a
# backup file of its own.)
f=$1; old=$2; new=$3; re=$4
bak=$(mktemp /tmp/evwire-mut.XXXXXX)
cp "$f" "$bak"
python3 -c "
import sys; p,o,n=sys.argv[1:4]; s=open(p).read(); assert o in s, 'pattern not found: '+o; open(p,'w').write(s.replace(o,n,1))" "$f" "$old" "$new" || { cp "$bak" "$f"; rm -f "$bak"; exit 1; }
out=$(chrt -i 0 nice -n 19 go test -race -count=1 -timeout 300s -run "$re" . 2>&1 | grep -E "^(    --- FAIL|--- FAIL|ok|FAIL)" | head -4)
cp "$bak" "$f"; rm -f "$bak"
echo "[$re] mutation '$old' -> '$new': $(echo $out | tr '\n' ' ')"
