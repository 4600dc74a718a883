package route

import "testing"

// leastAllocsPerRun is testing.AllocsPerRun repeated five times, keeping the
// smallest figure. AllocsPerRun counts the whole process's mallocs, so a
// goroutine left by an earlier test (a closing server, a timer, a scraper)
// or the race runtime can add a stray allocation to one measurement; an
// allocation in f itself shows in every one of them, so the minimum keeps
// the test able to fail without making it flaky.
func leastAllocsPerRun(runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for i := 1; i < 5 && least > 0; i++ {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
