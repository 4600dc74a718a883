package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress draws a one-line progress bar on w (stderr): the run being
// measured, requests done in it, runs done out of the total, and elapsed
// time. It redraws at most every 200 ms. Safe for concurrent use.
type Progress struct {
	w        io.Writer
	total    int
	start    time.Time
	mu       sync.Mutex
	runsDone int
	label    string
	reqTotal int
	reqDone  atomic.Int64
	last     time.Time
	quiet    bool
}

// NewProgress returns a bar for totalRuns runs. With w nil it draws nothing.
func NewProgress(w io.Writer, totalRuns int) *Progress {
	return &Progress{w: w, total: totalRuns, start: time.Now(), quiet: w == nil}
}

// AddRuns raises the number of runs expected.
func (p *Progress) AddRuns(n int) {
	p.mu.Lock()
	p.total += n
	p.mu.Unlock()
}

// Begin starts a run named label with reqs requests.
func (p *Progress) Begin(label string, reqs int) {
	p.mu.Lock()
	p.label, p.reqTotal = label, reqs
	p.reqDone.Store(0)
	p.mu.Unlock()
	p.draw(true)
}

// Tick records one finished request.
func (p *Progress) Tick() {
	p.reqDone.Add(1)
	p.draw(false)
}

// End finishes the current run.
func (p *Progress) End() {
	p.mu.Lock()
	p.runsDone++
	p.mu.Unlock()
	p.draw(true)
}

// Log prints a message line above the bar.
func (p *Progress) Log(format string, args ...any) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K"+format+"\n", args...)
}

// Done ends the bar with a newline.
func (p *Progress) Done() {
	if p.quiet {
		return
	}
	p.draw(true)
	fmt.Fprintln(p.w)
}

func (p *Progress) draw(force bool) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = float64(p.runsDone) / float64(p.total)
		if p.reqTotal > 0 && p.runsDone < p.total {
			frac += float64(p.reqDone.Load()) / float64(p.reqTotal) / float64(p.total)
		}
	}
	frac = min(frac, 1)
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %3.0f%% run %d/%d %s %d/%d req %s",
		strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100,
		min(p.runsDone+1, p.total), p.total, p.label, p.reqDone.Load(), p.reqTotal,
		time.Since(p.start).Round(time.Second))
}
