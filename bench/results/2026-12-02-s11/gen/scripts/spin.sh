#!/bin/bash
end=$((SECONDS+2)); n=0; while [ $SECONDS -lt $end ]; do n=$((n+1)); done; echo "$1 $n"
