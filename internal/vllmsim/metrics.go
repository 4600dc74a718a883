package vllmsim

import (
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pyFloat appends v formatted as Python's prometheus_client does: repr(float)
// ("12.0", "0.4137", "9.75e-06"), with large values in exponent form
// ("1.7537953269352946e+09").
func pyFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	e := strconv.FormatFloat(v, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return append(b, e...) // Go and Python both print "9.75e-06"
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		dot = len(s)
		s += ".0"
	}
	if v > 0 && dot > 6 {
		digits := strings.Replace(s, ".", "", 1)
		m := strings.TrimRight(digits[:1]+"."+digits[1:], "0")
		m = strings.TrimSuffix(m, ".")
		b = append(b, m...)
		b = append(b, "e+0"...)
		return strconv.AppendInt(b, int64(dot-1), 10)
	}
	return append(b, s...)
}

// metricsState is a generation's exporter state: the gauges as last refreshed
// (they lag when Faults.MetricsInterval > 0) and the lora_requests_info label sets
// seen so far (old sets stay exposed with their last timestamp, as in vLLM).
type metricsState struct {
	mu        sync.Mutex
	gauges    State
	refreshed time.Time
	loraSets  map[string]float64 // rendered label set -> unix timestamp
	created   float64
}

func (m *metricsState) init(g *generation) {
	m.loraSets = map[string]float64{}
	m.created = float64(g.origin.UnixNano()) / 1e9
}

type promWriter struct{ b []byte }

// scrapeBufs recycles /metrics render buffers.
var scrapeBufs = sync.Pool{New: func() any { return &promWriter{b: make([]byte, 0, 48<<10)} }}

func (p *promWriter) family(name, help, typ string) {
	p.b = append(p.b, "# HELP "...)
	p.b = append(p.b, name...)
	p.b = append(p.b, ' ')
	p.b = append(p.b, help...)
	p.b = append(p.b, "\n# TYPE "...)
	p.b = append(p.b, name...)
	p.b = append(p.b, ' ')
	p.b = append(p.b, typ...)
	p.b = append(p.b, '\n')
}

func (p *promWriter) sample(name, labels string, v float64) {
	p.sampleX(name, labels, "", "", v)
}

// sampleX writes name{labels,extra="value"} v; extra may be "".
func (p *promWriter) sampleX(name, labels, extra, value string, v float64) {
	p.b = append(p.b, name...)
	if labels != "" || extra != "" {
		p.b = append(p.b, '{')
		p.b = append(p.b, labels...)
		if extra != "" {
			if labels != "" {
				p.b = append(p.b, ',')
			}
			p.b = append(p.b, extra...)
			p.b = append(p.b, `="`...)
			p.b = append(p.b, value...)
			p.b = append(p.b, '"')
		}
		p.b = append(p.b, '}')
	}
	p.b = append(p.b, ' ')
	p.b = pyFloat(p.b, v)
	p.b = append(p.b, '\n')
}

func (p *promWriter) gauge(name, help, labels string, v float64) {
	p.family(name, help, "gauge")
	p.sample(name, labels, v)
}

func (p *promWriter) counter(name, help, labels string, v, created float64) {
	p.family(name+"_total", help, "counter")
	p.sample(name+"_total", labels, v)
	p.family(name+"_created", help, "gauge")
	p.sample(name+"_created", labels, created)
}

func (p *promWriter) histogram(name, help, labels string, h *Histogram, created float64) {
	p.family(name, help, "histogram")
	var cum uint64
	bucket, count, sum, cr := name+"_bucket", name+"_count", name+"_sum", name+"_created"
	for i, le := range h.set.le {
		cum += h.Counts[i]
		p.sampleX(bucket, labels, "le", le, float64(cum))
	}
	p.sampleX(bucket, labels, "le", "+Inf", float64(h.Count))
	p.sample(count, labels, float64(h.Count))
	p.sample(sum, labels, h.Sum)
	p.family(cr, help, "gauge")
	p.sample(cr, labels, created)
}

// scaledHistogram is histogram for a histogram of seconds rendered in
// units f times larger: bucket bounds and sum are multiplied by f.
func (p *promWriter) scaledHistogram(name, help, labels string, h *Histogram, f float64, created float64) {
	if f == 1 || f <= 0 {
		p.histogram(name, help, labels, h, created)
		return
	}
	p.family(name, help, "histogram")
	var cum uint64
	bucket, count, sum, cr := name+"_bucket", name+"_count", name+"_sum", name+"_created"
	for i, le := range h.set.bounds {
		cum += h.Counts[i]
		p.sampleX(bucket, labels, "le", string(pyFloat(nil, le*f)), float64(cum))
	}
	p.sampleX(bucket, labels, "le", "+Inf", float64(h.Count))
	p.sample(count, labels, float64(h.Count))
	p.sample(sum, labels, h.Sum*f)
	p.family(cr, help, "gauge")
	p.sample(cr, labels, created)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// writeMetrics renders /metrics in the Prometheus text format as vLLM's V1
// exporter does, plus http_/process_/python_ filler (a scrape is ~25-35 KB).
func (g *generation) writeMetrics(w http.ResponseWriter) {
	now := time.Now()
	truth := g.s.State()
	f := g.s.faults.Load()
	g.mu.Lock()
	stats := g.eng.Stats()
	g.mu.Unlock()
	if h := g.history.Load(); h != nil {
		stats.add(h) // a long-lived pod's counters (Server.SetHistory)
	}

	m := &g.metrics
	m.mu.Lock()
	if f.MetricsInterval <= 0 || m.refreshed.IsZero() || now.Sub(m.refreshed) >= f.MetricsInterval {
		m.gauges = truth
		m.refreshed = now
	}
	st := m.gauges
	var loraLines []string
	if len(g.cfg.LoRAs) > 0 {
		key := `max_lora="` + strconv.Itoa(g.cfg.MaxLoRAs) + `",running_lora_adapters="` +
			escapeLabel(strings.Join(st.RunningLoRAs, ",")) + `",waiting_lora_adapters="` +
			escapeLabel(strings.Join(st.WaitingLoRAs, ",")) + `"`
		ts := float64(now.UnixNano()) / 1e9
		for k, v := range m.loraSets {
			if k != key && v >= ts {
				ts = v + 1e-3
			}
		}
		m.loraSets[key] = ts
		if len(m.loraSets) > 64 { // bound memory: drop the oldest set
			oldest, ov := "", math.Inf(1)
			for k, v := range m.loraSets {
				if v < ov {
					oldest, ov = k, v
				}
			}
			delete(m.loraSets, oldest)
		}
		for k := range m.loraSets {
			loraLines = append(loraLines, k)
		}
		sort.Slice(loraLines, func(i, j int) bool { return m.loraSets[loraLines[i]] < m.loraSets[loraLines[j]] })
		for i, k := range loraLines {
			loraLines[i] = k + "\x00" + string(pyFloat(nil, m.loraSets[k]))
		}
	}
	m.mu.Unlock()

	model := escapeLabel(g.cfg.Model)
	em := `engine="0",model_name="` + model + `"`
	me := `model_name="` + model + `",engine="0"`
	created := m.created
	p := scrapeBufs.Get().(*promWriter)
	p.b = p.b[:0]
	defer scrapeBufs.Put(p)

	writeFiller(p, g, now)

	p.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", em, float64(st.Running))
	p.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", em, float64(st.Waiting))
	if len(loraLines) > 0 {
		p.family("vllm:lora_requests_info", "Running stats on lora requests.", "gauge")
		for _, l := range loraLines {
			i := strings.IndexByte(l, 0)
			p.b = append(p.b, "vllm:lora_requests_info{"...)
			p.b = append(p.b, l[:i]...)
			p.b = append(p.b, "} "...)
			p.b = append(p.b, l[i+1:]...)
			p.b = append(p.b, '\n')
		}
	}
	p.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", me, st.KVUse)
	p.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", me, float64(stats.PrefixQueries), created)
	p.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", me, float64(stats.PrefixHits), created)
	p.counter("vllmsim:lora_adapter_loads", "Simulator only (not a vLLM family): LoRA adapters loaded onto the GPU.", em, float64(stats.AdapterLoads), created)
	p.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", em, float64(stats.Preemptions), created)
	p.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", em, float64(stats.PromptTokens), created)
	p.counter("vllm:generation_tokens", "Number of generation tokens processed.", em, float64(stats.GenerationTokens), created)
	p.family("vllm:request_success_total", "Count of successfully processed requests.", "counter")
	for _, fr := range []struct {
		reason string
		n      int64
	}{{"stop", stats.FinishedStop}, {"length", stats.FinishedLength}, {"abort", stats.FinishedAbort}} {
		p.sample("vllm:request_success_total", em+`,finished_reason="`+fr.reason+`"`, float64(fr.n))
	}
	p.family("vllm:request_success_created", "Count of successfully processed requests.", "gauge")
	for _, r := range []string{"stop", "length", "abort"} {
		p.sample("vllm:request_success_created", em+`,finished_reason="`+r+`"`, created)
	}
	p.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", em, &stats.PromptLen, created)
	p.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", em, &stats.GenerateLen, created)
	p.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", me, &stats.TTFT, created)
	p.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", me, &stats.ITL, created)
	p.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", em, &stats.E2E, created)
	p.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", em, &stats.QueueTime, created)
	// The prefill time in the server's own (wall) seconds, as a real
	// server measures it: the engine's virtual seconds times TimeScale, so
	// a proxy comparing it with its own clock (probe's pod speed) sees a
	// pod's true pace. Its bucket bounds scale alike.
	p.scaledHistogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", em, &stats.PrefillTime, g.cfg.TimeScale, created)
	p.histogram("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill (excluding cached tokens).", em, &stats.PrefillComputed, created)
	p.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
		`block_size="`+strconv.Itoa(g.cfg.BlockSize)+`",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="`+
			strconv.Itoa(g.cfg.NumGPUBlocks)+`",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"`, 1)

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(p.b)
}

var highrLE = newBucketSet(0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60)

// writeFiller emits the python_/process_/http_ families a vLLM scrape carries.
func writeFiller(p *promWriter, g *generation, now time.Time) {
	for gen, v := range []float64{12034, 1568, 412} {
		l := `generation="` + strconv.Itoa(gen) + `"`
		if gen == 0 {
			p.family("python_gc_objects_collected_total", "Objects collected during gc", "counter")
		}
		p.sample("python_gc_objects_collected_total", l, v)
	}
	p.family("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", "counter")
	for gen := range 3 {
		p.sample("python_gc_objects_uncollectable_total", `generation="`+strconv.Itoa(gen)+`"`, 0)
	}
	p.family("python_gc_collections_total", "Number of times this generation was collected", "counter")
	for gen, v := range []float64{2211, 200, 11} {
		p.sample("python_gc_collections_total", `generation="`+strconv.Itoa(gen)+`"`, v)
	}
	p.gauge("python_info", "Python platform information", `implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"`, 1)
	p.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", "", 7.9341297664e+10)
	p.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", "", 3.623239680e+09)
	p.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "", float64(g.origin.Unix()))
	p.counter2("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", now.Sub(g.origin).Seconds()*0.35)
	g.connMu.Lock()
	fds := 64 + len(g.conns)
	g.connMu.Unlock()
	p.gauge("process_open_fds", "Number of open file descriptors.", "", float64(fds))
	p.gauge("process_max_fds", "Maximum number of open file descriptors.", "", 1048576)

	type route struct {
		handler, method string
		n               int64
	}
	routes := []route{
		{"/v1/completions", "POST", g.counters.completions.Load()},
		{"/v1/chat/completions", "POST", g.counters.chat.Load()},
		{"/v1/models", "GET", g.counters.models.Load()},
		{"/health", "GET", g.counters.health.Load()},
		{"/load", "GET", g.counters.load.Load()},
		{"/metrics", "GET", g.counters.metrics.Load()},
	}
	p.family("http_requests_total", "Total number of requests by method, status and handler.", "counter")
	for _, r := range routes {
		p.sample("http_requests_total", `handler="`+r.handler+`",method="`+r.method+`",status="2xx"`, float64(r.n))
	}
	p.family("http_requests_created", "Total number of requests by method, status and handler.", "gauge")
	for _, r := range routes {
		p.sample("http_requests_created", `handler="`+r.handler+`",method="`+r.method+`",status="2xx"`, g.metrics.created)
	}
	for _, name := range []string{"http_request_size_bytes", "http_response_size_bytes"} {
		p.family(name, "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored.", "summary")
		for _, r := range routes {
			p.sample(name+"_count", `handler="`+r.handler+`"`, float64(r.n))
			p.sample(name+"_sum", `handler="`+r.handler+`"`, float64(r.n)*412)
		}
		p.family(name+"_created", "Content length of incoming requests by handler.", "gauge")
		for _, r := range routes {
			p.sample(name+"_created", `handler="`+r.handler+`"`, g.metrics.created)
		}
	}
	highr := highrLE.bounds
	var total int64
	for _, r := range routes {
		total += r.n
	}
	p.family("http_request_duration_highr_seconds", "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations.", "histogram")
	for i := range highr {
		frac := float64(i+1) / float64(len(highr))
		p.sampleX("http_request_duration_highr_seconds_bucket", "", "le", highrLE.le[i], math.Floor(float64(total)*frac))
	}
	p.sample("http_request_duration_highr_seconds_bucket", `le="+Inf"`, float64(total))
	p.sample("http_request_duration_highr_seconds_count", "", float64(total))
	p.sample("http_request_duration_highr_seconds_sum", "", float64(total)*0.8)
	p.gauge("http_request_duration_highr_seconds_created", "Latency with many buckets but no API specific labels.", "", g.metrics.created)
	p.family("http_request_duration_seconds", "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important.", "histogram")
	for _, r := range routes {
		l := `handler="` + r.handler + `",method="` + r.method
		for i, ub := range []string{"0.1", "0.5", "1.0"} {
			p.sample("http_request_duration_seconds_bucket", l+`",le="`+ub+`"`, math.Floor(float64(r.n)*float64(i+1)/4))
		}
		p.sample("http_request_duration_seconds_bucket", l+`",le="+Inf"`, float64(r.n))
		p.sample("http_request_duration_seconds_count", l+`"`, float64(r.n))
		p.sample("http_request_duration_seconds_sum", l+`"`, float64(r.n)*0.8)
	}
}

// counter2 writes a counter family without a _created companion.
func (p *promWriter) counter2(name, help string, v float64) {
	p.family(name, help, "counter")
	p.sample(name, "", v)
}
