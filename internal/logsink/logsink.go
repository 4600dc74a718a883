// Package logsink is the proxy's log writer. A request's access line must
// never wait for the log's destination: a full pipe to a slow collector, a
// paused container runtime or a stalled disk would otherwise stall every
// request (each line is a write(2) on the request path, serialized by the
// file's own lock). Writer hands each line to one goroutine that writes
// them out in batches; when that goroutine falls behind by Capacity lines,
// new lines are dropped and counted instead of waited for.
package logsink

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Writer is an io.Writer whose Write copies the line and returns at once.
// Lines reach the underlying writer in the order they were accepted, in
// writes of up to batchBytes (one syscall for many lines under load).
// Write is safe for concurrent use; it never blocks and takes no lock until
// Close (the line is queued with a non-blocking channel send).
type Writer struct {
	out     io.Writer
	lines   chan *[]byte
	bufs    sync.Pool // *[]byte, capacity <= maxPooled
	dropped atomic.Uint64
	onDrop  func(total uint64)

	closed    atomic.Bool
	closeWait time.Duration // how long Close waits for a stalled destination
	quit      chan struct{}
	done      chan struct{}
	syncMu    sync.Mutex // after Close: lines are written directly, one at a time
}

// Capacity is how many lines may wait for the writer goroutine before new
// ones are dropped: at 300 bytes a line, about 2.4 MiB at most.
const Capacity = 8192

const (
	batchBytes = 64 << 10 // the most one write to out carries (a longer line goes alone)
	maxPooled  = 4 << 10  // longer line buffers are not kept for reuse
)

// New starts the goroutine writing to out. onDrop, if not nil, is called
// from that goroutine when lines start being dropped (once per episode: a
// batch written after drops, when the batch before it saw none), with the
// total dropped so far; it may log through w (the line is queued like any
// other). Close stops the goroutine.
func New(out io.Writer, onDrop func(total uint64)) *Writer {
	w := &Writer{
		out:       out,
		lines:     make(chan *[]byte, Capacity),
		onDrop:    onDrop,
		closeWait: CloseWait,
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go w.run()
	return w
}

// Write queues a copy of p (zerolog reuses p once Write returns). It always
// reports len(p), nil: a dropped line is counted in Dropped, not returned
// as an error (a logger has no one to return it to).
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed.Load() {
		w.syncMu.Lock()
		defer w.syncMu.Unlock()
		return w.out.Write(p)
	}
	bp, _ := w.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, max(len(p), 256))
		bp = &b
	}
	*bp = append((*bp)[:0], p...)
	select {
	case w.lines <- bp:
	default:
		w.dropped.Add(1)
		w.put(bp)
	}
	return len(p), nil
}

// Dropped is how many lines were dropped because the writer fell behind.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// CloseWait is how long Close waits for the queued lines to be written: a
// process whose stderr stalled must still be able to exit.
const CloseWait = 5 * time.Second

// ErrStalled is Close's error when the destination did not take the queued
// lines within CloseWait; they are abandoned with the goroutine writing them.
var ErrStalled = errors.New("logsink: the log destination stalled; queued lines were not written")

// Close writes out every line accepted so far and stops the goroutine;
// lines written after Close go straight to out. A line whose Write races
// with Close may be lost. Close returns once the queue is written, or
// ErrStalled after CloseWait if the destination does not take it.
func (w *Writer) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	close(w.quit)
	t := time.NewTimer(w.closeWait)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C:
		return ErrStalled
	}
}

func (w *Writer) put(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		w.bufs.Put(bp)
	}
}

// run writes the queued lines: it waits for one, takes every line already
// queued behind it up to batchBytes, and writes them in one call. After
// Close it writes what is left the same way and returns.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]byte, 0, batchBytes)
	var seen uint64   // Dropped after the previous batch
	dropping := false // the previous batch saw new drops
	for {
		select {
		case bp := <-w.lines:
			batch = w.fill(w.take(batch[:0], bp))
			_, _ = w.out.Write(batch)
			if d := w.dropped.Load(); d != seen {
				if !dropping && w.onDrop != nil {
					w.onDrop(d)
				}
				seen, dropping = d, true
			} else {
				dropping = false
			}
			if cap(batch) > 4*batchBytes { // one huge line: do not keep its buffer
				batch = make([]byte, 0, batchBytes)
			}
		case <-w.quit:
			for len(w.lines) > 0 {
				batch = w.fill(batch[:0])
				_, _ = w.out.Write(batch)
			}
			return
		}
	}
}

// fill appends the lines already queued, without waiting, until batch
// holds batchBytes.
func (w *Writer) fill(batch []byte) []byte {
	for len(batch) < batchBytes {
		select {
		case bp := <-w.lines:
			batch = w.take(batch, bp)
		default:
			return batch
		}
	}
	return batch
}

// take appends the line in bp to batch and recycles bp.
func (w *Writer) take(batch []byte, bp *[]byte) []byte {
	batch = append(batch, *bp...)
	w.put(bp)
	return batch
}
