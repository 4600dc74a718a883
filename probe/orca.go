package probe

import (
	"bytes"
	"math"
	"time"

	"github.com/valyala/fastjson"
)

// ORCAHeader is the response header that carries ORCA load reports, and
// ORCAFormatHeader the request header that asks for one.
const (
	ORCAHeader       = "endpoint-load-metrics"
	ORCAFormatHeader = "endpoint-load-metrics-format"
)

// ParseORCA extracts a Load from the value of an endpoint-load-metrics
// response header. Two forms are understood:
//
//	TEXT named_metrics.kv_cache_usage_perc=0.41, named_metrics.num_requests_waiting=3.0
//	JSON {"named_metrics":{"kv_cache_usage_perc":0.41,"num_requests_waiting":3.0}}
//
// TEXT pairs may also use ':' instead of '=' (older Envoy). The metrics read
// are named_metrics.kv_cache_usage_perc (KVUse, clamped to [0,1]),
// named_metrics.num_requests_waiting (Waiting) and
// named_metrics.num_requests_running (Running, which vLLM does not send);
// every other field (cpu_utilization, rps_fractional, ...) is ignored, as are
// values that are not finite non-negative numbers.
//
// ok is false for the binary "BIN " form, an unknown prefix, malformed JSON
// or a report that carries none of the three metrics: such a header says
// nothing about load and must not replace a report that does.
//
// The returned Load has At = now and Source = SourceORCA. ParseORCA is safe
// for concurrent use and does not allocate.
func ParseORCA(header []byte, now time.Time) (l Load, ok bool) {
	l = Unknown(now, SourceORCA)
	h := bytes.TrimSpace(header)
	switch {
	case hasPrefixFold(h, "TEXT "):
		ok = parseORCAText(&l, h[5:])
	case hasPrefixFold(h, "JSON "):
		ok = parseORCAJSON(&l, h[5:])
	}
	return l, ok
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}

// orcaSet stores v in l for the metric name (without "named_metrics.") and
// reports whether the name was one ParseORCA reads.
func orcaSet(l *Load, name []byte, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return false
	}
	switch string(name) {
	case "kv_cache_usage_perc":
		l.KVUse = min(v, 1)
	case "num_requests_waiting":
		if v > maxCount {
			return false
		}
		l.Waiting = int(math.Round(v))
	case "num_requests_running":
		if v > maxCount {
			return false
		}
		l.Running = int(math.Round(v))
	default:
		return false
	}
	return true
}

func parseORCAText(l *Load, b []byte) bool {
	ok := false
	for len(b) > 0 {
		var pair []byte
		if i := bytes.IndexByte(b, ','); i >= 0 {
			pair, b = b[:i], b[i+1:]
		} else {
			pair, b = b, nil
		}
		sep := bytes.IndexAny(pair, "=:")
		if sep < 0 {
			continue
		}
		key := bytes.TrimSpace(pair[:sep])
		name, found := bytes.CutPrefix(key, []byte("named_metrics."))
		if !found {
			continue
		}
		v, valid := parseORCAValue(bytes.TrimSpace(pair[sep+1:]))
		if valid && orcaSet(l, name, v) {
			ok = true
		}
	}
	return ok
}

func parseORCAValue(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	v, err := parseFloat(b)
	return v, err == nil
}

func parseORCAJSON(l *Load, b []byte) bool {
	p := jsonParsers.Get()
	defer jsonParsers.Put(p)
	v, err := p.ParseBytes(b)
	if err != nil {
		return false
	}
	nm := v.GetObject("named_metrics")
	if nm == nil {
		return false
	}
	ok := false
	nm.Visit(func(key []byte, v *fastjson.Value) {
		if v.Type() != fastjson.TypeNumber {
			return
		}
		f, err := v.Float64()
		if err == nil && orcaSet(l, key, f) {
			ok = true
		}
	})
	return ok
}
