package probe

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxMetricsBytes is the largest /metrics body ParseMetrics accepts. vLLM's
// full scrape is 20-100 KB; 4 MiB leaves room for many LoRA series and
// engines while bounding the work a misbehaving server can cause.
const MaxMetricsBytes = 4 << 20

// maxCount bounds the request counts accepted from a report. Larger values
// are treated as garbage rather than overflowing an int.
const maxCount = 1 << 30

// Errors returned by the parsers. Match them with errors.Is.
var (
	ErrTooLarge = errors.New("probe: body too large")
	ErrNoLoad   = errors.New("probe: no load signal in body")
	ErrSyntax   = errors.New("probe: malformed body")
)

// The vLLM metric families ParseMetrics reads. Every other family is skipped.
const (
	famRunning = "vllm:num_requests_running"
	famWaiting = "vllm:num_requests_waiting"
	famKV      = "vllm:kv_cache_usage_perc"
	famGPU     = "vllm:gpu_cache_usage_perc" // the pre-2026 name of famKV
	famLoRA    = "vllm:lora_requests_info"
	famPrompt  = "vllm:prompt_tokens_total"
	famGen     = "vllm:generation_tokens_total"

	// The prefill counters (Load.PrefillSeconds, PrefillTokens): sums of
	// per-request histograms, observed when a request finishes.
	famPrefillTime   = "vllm:request_prefill_time_seconds_sum"
	famPrefillKV     = "vllm:request_prefill_kv_computed_tokens_sum"
	famPromptLenSum  = "vllm:request_prompt_tokens_sum"
	maxPrefillTotals = 1e15 // larger sums are garbage (3e7 years, or 1e15 tokens)
)

// ParseMetrics extracts a Load from the body of vLLM's /metrics endpoint
// (Prometheus text exposition format). It is a streaming line scan: it
// reads only the samples of the families it needs and never builds the full
// metric model, so it costs a few microseconds and a handful of allocations
// on a 30 KB scrape (the LoRA adapter names are the only strings it keeps).
//
// Semantics:
//   - Running and Waiting are summed over every series (one per engine with
//     data parallelism); KVUse is the maximum over series, read from
//     vllm:kv_cache_usage_perc or, when that family is absent, from the old
//     name vllm:gpu_cache_usage_perc. KVUse is clamped to [0,1].
//   - The LoRA fields come from the vllm:lora_requests_info series with the
//     largest value (the value is a unix timestamp and old label sets never
//     disappear). Labels are read by name, in any order.
//   - Samples whose value is NaN, infinite, negative or absurdly large are
//     ignored, as is an optional sample timestamp after the value.
//   - Tokens is the sum of the vllm:prompt_tokens_total and
//     vllm:generation_tokens_total samples (counters; 0 when neither is
//     present). Negative samples are ignored.
//   - PrefillSeconds is the sum over series of
//     vllm:request_prefill_time_seconds_sum, PrefillTokens that of
//     vllm:request_prefill_kv_computed_tokens_sum or, when that family is
//     absent, of vllm:request_prompt_tokens_sum; both stay 0 unless the
//     time and a token family are present (a sum above 1e15 is ignored).
//   - A family that is absent (or has only ignored samples) leaves its field
//     unknown (-1, or nil/0 for LoRA). A body with none of the running,
//     waiting and KV families is ErrNoLoad; a body larger than
//     MaxMetricsBytes is ErrTooLarge. Lines of other families are never
//     validated, so garbage in them is not an error.
//
// The returned Load has At = now and Source = SourceNone: the caller sets
// Source. The Load does not alias body. ParseMetrics is safe for concurrent
// use.
func ParseMetrics(body []byte, now time.Time) (Load, error) {
	l := Unknown(now, SourceNone)
	if len(body) > MaxMetricsBytes {
		return l, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(body), MaxMetricsBytes)
	}
	var (
		running, waiting, kv, gpu float64
		hasRun, hasWait, hasKV    bool
		hasGPU, hasLoRA           bool
		loraVal                   float64
		tokens                    float64
		loraLabels                []byte // label block of the newest LoRA series, aliases body
		pfSecs, pfKV, pfPrompt    float64
		hasPFSecs, hasPFKV        bool
		hasPFPrompt               bool
		baseModel                 []byte // model_name label of the first load sample, aliases body
	)
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		// Fast reject: every family we want starts with "vllm:n", "vllm:k",
		// "vllm:g", "vllm:l", "vllm:p" or "vllm:r"; comments, histograms of other prefixes and
		// process_/python_ filler are skipped after a few byte compares.
		line = trimLeftSpace(line)
		if len(line) < 6 || line[0] != 'v' || line[4] != ':' || !wantedFirst[line[5]] || !bytes.HasPrefix(line, []byte("vllm:")) {
			continue
		}
		nameEnd := bytes.IndexAny(line, "{ \t")
		if nameEnd < 0 {
			continue
		}
		fam := familyOf(line[:nameEnd])
		if fam == 0 {
			continue
		}
		rest := line[nameEnd:]
		var labels []byte
		if rest[0] == '{' {
			end := labelBlockEnd(rest)
			if end < 0 {
				continue // unterminated label block: skip the sample
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		v, ok := sampleValue(rest)
		if !ok {
			continue
		}
		switch fam {
		case 1, 2: // running, waiting
			if v < 0 || v > maxCount {
				continue
			}
			if baseModel == nil {
				baseModel = labelValue(labels, "model_name")
			}
			if fam == 1 {
				running += v
				hasRun = true
			} else {
				waiting += v
				hasWait = true
			}
		case 3, 4: // KV use, new and old names
			if v < 0 {
				continue
			}
			v = min(v, 1)
			if fam == 3 {
				if !hasKV || v > kv {
					kv = v
				}
				hasKV = true
			} else {
				if !hasGPU || v > gpu {
					gpu = v
				}
				hasGPU = true
			}
		case 5: // LoRA info: keep the series with the newest timestamp
			if !hasLoRA || v > loraVal {
				loraVal, loraLabels, hasLoRA = v, labels, true
			}
		case 6, 7: // token counters
			if v > 0 {
				tokens += v
			}
		case 8, 9, 10: // prefill counters: summed over engines
			if v < 0 || v > maxPrefillTotals {
				continue
			}
			switch fam {
			case 8:
				pfSecs += v
				hasPFSecs = true
			case 9:
				pfKV += v
				hasPFKV = true
			default:
				pfPrompt += v
				hasPFPrompt = true
			}
		}
	}
	if !hasRun && !hasWait && !hasKV && !hasGPU {
		return l, ErrNoLoad
	}
	if hasRun {
		l.Running = int(math.Round(min(running, maxCount)))
	}
	if hasWait {
		l.Waiting = int(math.Round(min(waiting, maxCount)))
	}
	switch {
	case hasKV:
		l.KVUse = kv
	case hasGPU:
		l.KVUse = gpu
	}
	if hasLoRA {
		parseLoRALabels(&l, loraLabels)
	}
	l.Tokens = tokens
	if hasPFSecs && (hasPFKV || hasPFPrompt) {
		l.PrefillSeconds, l.PrefillTokens = pfSecs, pfKV
		if !hasPFKV {
			l.PrefillTokens = pfPrompt
		}
	}
	if len(baseModel) > 0 {
		l.BaseModel = string(baseModel)
	}
	return l, nil
}

// nextLabel reads the first `name="value"` pair of a label block (without
// braces, pairs separated by commas, blanks allowed around them). It
// returns the name, the raw (still escaped) value, whether the value holds
// escapes, and the rest of the block; ok is false at the end of the block
// or on a malformed pair (the rest is then unread). It is the one label
// scanner of the parser.
func nextLabel(b []byte) (name, raw []byte, esc bool, rest []byte, ok bool) {
	b = bytes.TrimLeft(b, " \t,")
	eq := bytes.IndexByte(b, '=')
	if eq < 0 {
		return nil, nil, false, nil, false
	}
	name = bytes.TrimSpace(b[:eq])
	b = trimLeftSpace(b[eq+1:])
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			esc = true
			i++
		case '"':
			return name, b[1:i], esc, b[i+1:], true
		}
	}
	return nil, nil, false, nil, false
}

// labelValue returns the raw (still escaped) value of label name in a label
// block `a="x",b="y"`, or nil. Values containing escapes are returned as
// written; model names do not contain quotes in practice.
func labelValue(labels []byte, name string) []byte {
	for {
		n, raw, _, rest, ok := nextLabel(labels)
		if !ok {
			return nil
		}
		if string(n) == name {
			return raw
		}
		labels = rest
	}
}

// wantedFirst marks the bytes that follow "vllm:" in a wanted family name.
var wantedFirst = [256]bool{'n': true, 'k': true, 'g': true, 'l': true, 'p': true, 'r': true}

// familyOf maps a metric name to the family number ParseMetrics switches on;
// 0 means "not wanted". The switch on string(name) does not allocate.
func familyOf(name []byte) int {
	switch string(name) {
	case famRunning:
		return 1
	case famWaiting:
		return 2
	case famKV:
		return 3
	case famGPU:
		return 4
	case famLoRA:
		return 5
	case famPrompt:
		return 6
	case famGen:
		return 7
	case famPrefillTime:
		return 8
	case famPrefillKV:
		return 9
	case famPromptLenSum:
		return 10
	}
	return 0
}

func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// labelBlockEnd returns the index of the '}' closing the label block that
// starts at b[0] == '{', honouring quoted values with backslash escapes, or
// -1 if the block is not terminated on this line.
func labelBlockEnd(b []byte) int {
	inQuote := false
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case inQuote && c == '\\':
			i++ // skip the escaped byte
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}

// sampleValue parses the value that follows a metric name or label block:
// blanks, the value, then an optional timestamp which is ignored. It reports
// false for a missing, malformed, NaN or infinite value.
func sampleValue(b []byte) (float64, bool) {
	b = trimLeftSpace(b)
	end := 0
	for end < len(b) && b[end] != ' ' && b[end] != '\t' && b[end] != '\r' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	v, err := parseFloat(b[:end])
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// parseFloat parses a Prometheus sample value. Plain decimals such as "12.0"
// or "3" (the common case for gauges) take a fast path; everything else
// ("9.75e-06", "1.75e+09", "NaN", "+Inf") goes to strconv.
func parseFloat(b []byte) (float64, error) {
	if len(b) <= 15 {
		var mant uint64
		digits, frac, dot := 0, 0, false
		simple := true
		for _, c := range b {
			switch {
			case c >= '0' && c <= '9':
				mant = mant*10 + uint64(c-'0')
				digits++
				if dot {
					frac++
				}
			case c == '.' && !dot:
				dot = true
			default:
				simple = false
			}
			if !simple {
				break
			}
		}
		if simple && digits > 0 {
			return float64(mant) / pow10[frac], nil
		}
	}
	return strconv.ParseFloat(string(b), 64)
}

// pow10 holds exact powers of ten; the fast path divides a <= 15 digit
// mantissa by one of them, which is correctly rounded since both are exact.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseLoRALabels reads max_lora, running_lora_adapters and
// waiting_lora_adapters from a label block (without braces) into l. Unknown
// labels are ignored; a malformed block leaves the rest unread.
func parseLoRALabels(l *Load, b []byte) {
	for {
		name, raw, esc, rest, ok := nextLabel(b)
		if !ok {
			return
		}
		b = rest
		var val string
		switch string(name) {
		case "max_lora":
			n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
			if err == nil && n >= 0 && n <= maxCount {
				l.MaxLoRA = n
			}
			continue
		case "running_lora_adapters", "waiting_lora_adapters":
			val = string(raw)
			if esc {
				val = unescapeLabel(val)
			}
		default:
			continue
		}
		list := splitAdapters(val)
		if string(name) == "running_lora_adapters" {
			l.RunningLoRAs = list
		} else {
			l.WaitingLoRAs = list
		}
	}
}

// unescapeLabel undoes the text format's label escapes (\\, \", \n).
func unescapeLabel(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				c = '\n'
			default:
				c = s[i]
			}
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// splitAdapters splits a comma-separated adapter list, trimming blanks and
// dropping empty names. It returns nil for an empty list.
func splitAdapters(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	n := strings.Count(s, ",") + 1
	out := make([]string, 0, n)
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
