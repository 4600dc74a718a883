package probe

import (
	"bytes"
	"fmt"
)

// vllmMetrics generates a /metrics body shaped like vLLM V1's: HELP/TYPE
// comments, python_/process_ filler, the load gauges (one series per engine),
// LoRA info series, counters with _created series and latency histograms.
// With engines=1, model "meta-llama/Llama-3.1-8B-Instruct" it is about 30 KB.
func vllmMetrics(engines int, running, waiting []int, kv []float64) []byte {
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# HELP python_gc_objects_collected_total Objects collected during gc\n# TYPE python_gc_objects_collected_total counter\n")
	for g := range 3 {
		p("python_gc_objects_collected_total{generation=\"%d\"} %d.0\n", g, 12000/(g+1))
	}
	p("# HELP python_info Python platform information\n# TYPE python_info gauge\n")
	p("python_info{implementation=\"CPython\",major=\"3\",minor=\"12\",patchlevel=\"8\",version=\"3.12.8\"} 1.0\n")
	for _, m := range []string{"process_virtual_memory_bytes 3.4359738368e+010", "process_resident_memory_bytes 2.147483648e+09",
		"process_start_time_seconds 1.75379532693e+09", "process_cpu_seconds_total 1234.56", "process_open_fds 87.0", "process_max_fds 1.048576e+06"} {
		p("# HELP %[1]s x\n# TYPE %[1]s gauge\n%[2]s\n", m[:bytes.IndexByte([]byte(m), ' ')], m)
	}
	gauge := func(name string, vals func(e int) string) {
		p("# HELP %s Number of requests.\n# TYPE %s gauge\n", name, name)
		for e := range engines {
			// Label order differs between families on purpose.
			if e%2 == 0 {
				p("%s{engine=\"%d\",model_name=\"%s\"} %s\n", name, e, model, vals(e))
			} else {
				p("%s{model_name=\"%s\",engine=\"%d\"} %s\n", name, model, e, vals(e))
			}
		}
	}
	gauge("vllm:num_requests_running", func(e int) string { return fmt.Sprintf("%d.0", running[e]) })
	gauge("vllm:num_requests_waiting", func(e int) string { return fmt.Sprintf("%d.0", waiting[e]) })
	gauge("vllm:kv_cache_usage_perc", func(e int) string { return fmt.Sprintf("%g", kv[e]) })
	p("# HELP vllm:lora_requests_info Running stats on lora requests.\n# TYPE vllm:lora_requests_info gauge\n")
	p("vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1.7644013e+09\n")
	p("vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql-lora,chat-lora\",waiting_lora_adapters=\"chat-lora\"} 1.7644013409e+09\n")
	p("vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql-lora\",waiting_lora_adapters=\"\"} 1.7644013401e+09\n")
	counter := func(name string, v float64, extras ...string) {
		if len(extras) == 0 {
			extras = []string{""}
		}
		p("# HELP %s_total Counter.\n# TYPE %s_total counter\n", name, name)
		for _, extra := range extras {
			for e := range engines {
				p("%s_total{engine=\"%d\",model_name=\"%s\"%s} %g\n", name, e, model, extra, v)
			}
		}
		p("# HELP %s_created Counter.\n# TYPE %s_created gauge\n", name, name)
		for _, extra := range extras {
			for e := range engines {
				p("%s_created{engine=\"%d\",model_name=\"%s\"%s} 1.7537953269352946e+09\n", name, e, model, extra)
			}
		}
	}
	counter("vllm:num_preemptions", 3)
	counter("vllm:prompt_tokens", 1.234567e+06)
	counter("vllm:generation_tokens", 9.87654e+05)
	counter("vllm:prefix_cache_queries", 4.5e+06)
	counter("vllm:prefix_cache_hits", 2.1e+06)
	counter("vllm:request_success", 1234, `,finished_reason="stop"`, `,finished_reason="length"`, `,finished_reason="abort"`, `,finished_reason="error"`)
	hist := func(name string, buckets []float64) {
		p("# HELP %s Histogram.\n# TYPE %s histogram\n", name, name)
		for e := range engines {
			n := 0
			for i, le := range buckets {
				n += 10 * (i + 1)
				p("%s_bucket{engine=\"%d\",le=\"%g\",model_name=\"%s\"} %d.0\n", name, e, le, model, n)
			}
			p("%s_bucket{engine=\"%d\",le=\"+Inf\",model_name=\"%s\"} %d.0\n", name, e, model, n)
			p("%s_count{engine=\"%d\",model_name=\"%s\"} %d.0\n", name, e, model, n)
			p("%s_sum{engine=\"%d\",model_name=\"%s\"} 9.75e-06\n", name, e, model)
		}
		p("# HELP %s_created Histogram.\n# TYPE %s_created gauge\n", name, name)
		for e := range engines {
			p("%s_created{engine=\"%d\",model_name=\"%s\"} 1.7537953269352946e+09\n", name, e, model)
		}
	}
	ttft := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itl := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	tokens := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
	hist("vllm:time_to_first_token_seconds", ttft)
	hist("vllm:inter_token_latency_seconds", itl)
	hist("vllm:e2e_request_latency_seconds", itl)
	hist("vllm:request_queue_time_seconds", itl)
	hist("vllm:request_prefill_time_seconds", itl)
	hist("vllm:request_prompt_tokens", tokens)
	hist("vllm:request_generation_tokens", tokens)
	hist("vllm:request_decode_time_seconds", itl)
	hist("vllm:request_inference_time_seconds", itl)
	hist("vllm:iteration_tokens_total", tokens)
	p("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n")
	p("vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"27000\"} 1.0\n")
	handlers := []string{"/v1/chat/completions", "/v1/completions", "/metrics", "/health", "/load"}
	p("# HELP http_requests_total Total number of requests.\n# TYPE http_requests_total counter\n")
	for _, h := range handlers {
		p("http_requests_total{handler=%q,method=\"POST\",status=\"2xx\"} 1024.0\n", h)
	}
	p("# HELP http_requests_created Total number of requests.\n# TYPE http_requests_created gauge\n")
	for _, h := range handlers {
		p("http_requests_created{handler=%q,method=\"POST\",status=\"2xx\"} 1.7537953269352946e+09\n", h)
	}
	return b.Bytes()
}

// realisticMetrics is the benchmark body: one engine, about 30 KB.
func realisticMetrics() []byte {
	return vllmMetrics(1, []int{12}, []int{3}, []float64{0.4137})
}
