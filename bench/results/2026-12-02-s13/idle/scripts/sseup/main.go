//go:build ignore

// sseup ADDR (go build -o /tmp/idle13/sseup-bin main.go): a small upstream for memwarm.py. A POST whose body holds "stream":true gets a short
// SSE stream (two frames and [DONE], chunked); any other request a small JSON body; /metrics a tiny
// vLLM exposition.
package main

import (
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	http.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "vllm:num_requests_running{model_name=\"m\"} 0.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.0\n")
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, f := range []string{`{"choices":[{"index":0,"text":"o"}]}`, `{"choices":[{"index":0,"text":"k"}]}`, "[DONE]"} {
				io.WriteString(w, "data: "+f+"\n\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	if err := http.ListenAndServe(os.Args[1], nil); err != nil {
		panic(err)
	}
}
