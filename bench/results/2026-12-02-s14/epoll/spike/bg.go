package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// background stands for the work a production proxy runs beside its
// loops (probes, scrapes, the admin listener, GC): every period a
// goroutine wakes on a timer and forces a garbage collection (a stop-the-
// world that must reach every loop). On SIGTERM it prints how late the
// timer fired and how long each collection took, then exits.
func background(period time.Duration) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	var late, gc []time.Duration
	t := time.NewTicker(period)
	next := time.Now().Add(period)
	for {
		select {
		case <-t.C:
			late = append(late, time.Since(next))
			start := time.Now()
			runtime.GC()
			gc = append(gc, time.Since(start))
			next = next.Add(period)
			if d := time.Until(next); d < 0 {
				next = time.Now().Add(period) // ticks were dropped
			}
		case <-term:
			fmt.Fprintf(os.Stderr, "background: %d ticks; timer lateness %s; runtime.GC duration %s\n", len(late), summary(late), summary(gc))
			os.Exit(0)
		}
	}
}

func summary(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))].Round(time.Microsecond) }
	return fmt.Sprintf("p50 %s p90 %s max %s", q(0.5), q(0.9), d[len(d)-1].Round(time.Microsecond))
}
