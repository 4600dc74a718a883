package bench

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// TraceRow is one request of a production trace in the Azure LLM inference
// trace schema (TIMESTAMP,ContextTokens,GeneratedTokens).
type TraceRow struct {
	At     time.Duration // arrival, from the trace's first row
	Prompt int           // ContextTokens
	Output int           // GeneratedTokens
}

// traceTimeLayout is the TIMESTAMP format of the Azure traces
// ("2023-11-16 18:17:03.9799600"); fractional digits vary.
const traceTimeLayout = "2006-01-02 15:04:05.999999999"

// codeTraceSlice is the first 400 rows of the Azure 2023 code trace
// (testdata/azure_code_2023_slice.csv; CC-BY 4.0, Patel et al., "Splitwise",
// ISCA 2024: see the README next to it). It is the default of -sizes trace.
//
//go:embed testdata/azure_code_2023_slice.csv
var codeTraceSlice []byte

// ReadTrace parses a trace in the Azure schema: a header line naming
// TIMESTAMP, ContextTokens and GeneratedTokens (in any order), then one row
// per request in arrival order. Arrival offsets are relative to the first
// row. Rows out of time order, or with a size below 1, are errors naming
// the line.
func ReadTrace(r io.Reader) ([]TraceRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	col := map[string]int{}
	line := 0
	var out []TraceRow
	var first time.Time
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(col) == 0 {
			for i, name := range f {
				col[strings.TrimSpace(name)] = i
			}
			for _, need := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
				if _, ok := col[need]; !ok {
					return nil, fmt.Errorf("trace line 1: no %s column (want TIMESTAMP,ContextTokens,GeneratedTokens)", need)
				}
			}
			continue
		}
		field := func(name string) string {
			if i := col[name]; i < len(f) {
				return strings.TrimSpace(f[i])
			}
			return ""
		}
		ts, err := time.Parse(traceTimeLayout, field("TIMESTAMP"))
		if err != nil {
			return nil, fmt.Errorf("trace line %d: TIMESTAMP: %v", line, err)
		}
		p, err1 := strconv.Atoi(field("ContextTokens"))
		o, err2 := strconv.Atoi(field("GeneratedTokens"))
		if err1 != nil || err2 != nil || p < 1 || o < 1 {
			return nil, fmt.Errorf("trace line %d: ContextTokens and GeneratedTokens must be integers >= 1", line)
		}
		if len(out) == 0 {
			first = ts
		}
		at := ts.Sub(first)
		if n := len(out); n > 0 && at < out[n-1].At {
			return nil, fmt.Errorf("trace line %d: TIMESTAMP goes back in time", line)
		}
		out = append(out, TraceRow{At: at, Prompt: p, Output: o})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace: no rows")
	}
	return out, nil
}

// LoadTrace reads the trace at path; "" is the committed slice of the Azure
// code trace.
func LoadTrace(path string) ([]TraceRow, error) {
	if path == "" {
		return ReadTrace(bytes.NewReader(codeTraceSlice))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// TraceWindow returns the rows arriving in [offset, offset+span) of trace
// time (span <= 0: to the end), with arrivals rebased to the window's start
// and divided by speed (speed 2 replays twice as fast; <= 0 means 1).
func TraceWindow(rows []TraceRow, offset, span time.Duration, speed float64) []TraceRow {
	if speed <= 0 {
		speed = 1
	}
	var out []TraceRow
	for _, r := range rows {
		if r.At < offset || (span > 0 && r.At >= offset+span) {
			continue
		}
		r.At = time.Duration(float64(r.At-offset) / speed)
		out = append(out, r)
	}
	return out
}

// TraceDuration is the trace time covered by rows (first to last arrival).
func TraceDuration(rows []TraceRow) time.Duration {
	if len(rows) == 0 {
		return 0
	}
	return rows[len(rows)-1].At - rows[0].At
}
