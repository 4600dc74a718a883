package bench

import (
	"os"
	"strconv"
	"strings"
)

// RSS returns the resident set size of process pid in bytes, read from
// /proc/<pid>/status (VmRSS); pid 0 means this process. It returns 0 where
// /proc is unavailable. The overhead scenario and the soak both read it.
func RSS(pid int) uint64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
