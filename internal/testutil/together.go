// Package testutil holds helpers shared by the tests of several packages.
// Production code never imports it.
package testutil

import "sync"

// Together runs f(i) for i in [0, n) on n goroutines released at once,
// and returns when all have returned: the most contention a test can ask
// of the race detector and the scheduler.
func Together(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
