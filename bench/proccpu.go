package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on every Linux that matters).
const clockTick = 10 * time.Millisecond

// groupCPU returns the CPU time (user + system) used so far by the live
// processes of process group pgid (a child started with Setpgid, so nginx's
// workers count with their master), read from /proc. It returns 0 where
// /proc is not available.
func groupCPU(pgid int) time.Duration {
	var ticks int64
	eachGroupProc(pgid, func(_ string, f []string) {
		if len(f) < 13 {
			return
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	})
	return time.Duration(ticks) * clockTick
}

// eachGroupProc calls f with the /proc directory and the stat fields after
// the command name (state ppid pgrp ... utime is f[11], stime f[12]) of
// every live process of process group pgid; none where /proc is not
// available or pgid <= 0.
func eachGroupProc(pgid int, f func(dir string, fields []string)) {
	if pgid <= 0 {
		return
	}
	want := strconv.Itoa(pgid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: fields start
		// after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		if fields := strings.Fields(string(b[i+1:])); len(fields) > 2 && fields[2] == want {
			f(filepath.Dir(p), fields)
		}
	}
}
