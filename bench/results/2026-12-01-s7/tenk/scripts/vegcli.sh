#!/bin/bash
# vegcli.sh RATE DUR URL: the vegeta CLI with the bench's settings, report as JSON
printf "POST $3\nContent-Type: application/json\n@/tmp/tk/body.json\n" > /tmp/tk/targets-cli.txt
/tmp/tk/vegeta attack -targets /tmp/tk/targets-cli.txt -rate $1/s -duration $2 -keepalive -http2=false -workers 64 -max-workers 512 | /tmp/tk/vegeta report -type json
