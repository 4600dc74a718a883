package bench

import (
	"os"
	"strings"
)

// autogroupPath is Linux's switch for scheduler autogroups.
const autogroupPath = "/proc/sys/kernel/sched_autogroup_enabled"

// autogroupNote returns a warning for the report when the kernel groups
// processes by session for CPU time (autogroup, read from path; "" when
// off or unknown). With autogroups on, `nice` orders processes only within
// their own session: a `nice -n 19` build or test started from another
// shell competes with the bench's processes as an equal, and a timing run
// on a shared machine is then not protected by the others' nice. Turning
// it off (as root: `echo 0 > /proc/sys/kernel/sched_autogroup_enabled`)
// gives niced work its usual small weight. On this 2-CPU machine, two busy
// loops in separate sessions on one CPU shared it 84/82 ticks with
// autogroups on, nice 0 against nice 19, and 200/3 with them off
// (session 7).
func autogroupNote(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return ""
	}
	return "the kernel's scheduler autogroups are on (" + path + " = 1): `nice` then orders processes only within their own session, so other sessions' niced builds and tests took CPU from this run as equals (see the \"other\" CPUs below); as root, `echo 0 > " + path + "` before a timing run"
}
