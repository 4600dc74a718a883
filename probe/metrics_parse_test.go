package probe

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name                  string
		body                  string
		running, waiting, srv int
		kv                    float64
		maxLoRA               int
		runLoRA, waitLoRA     []string
		err                   error
	}{
		{
			name: "reference sample",
			body: `vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.4137
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="chat-lora"} 1.7644013409e+09
`,
			running: 12, waiting: 3, kv: 0.4137, srv: -1, maxLoRA: 4,
			runLoRA: []string{"sql-lora", "chat-lora"}, waitLoRA: []string{"chat-lora"},
		},
		{
			name: "engines summed, kv max, label order varies",
			body: `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:num_requests_running{model_name="m",engine="1"} 6.0
vllm:num_requests_waiting{model_name="m",engine="1"} 2
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.75
`,
			running: 10, waiting: 3, kv: 0.75, srv: -1,
		},
		{
			name:    "fallback to gpu_cache_usage_perc",
			body:    "vllm:num_requests_running{engine=\"0\"} 1\nvllm:gpu_cache_usage_perc{engine=\"0\"} 9.75e-06\n",
			running: 1, waiting: -1, kv: 9.75e-06, srv: -1,
		},
		{
			name:    "new kv name wins over old",
			body:    "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.1\n",
			running: -1, waiting: -1, kv: 0.1, srv: -1,
		},
		{
			name:    "created series, timestamps, CRLF and blanks ignored",
			body:    "vllm:num_requests_running_created{engine=\"0\"} 1.75e+09\r\n  vllm:num_requests_running{engine=\"0\"} 2.0 1700000000000\r\n\r\nvllm:num_requests_waiting 5\r\n",
			running: 2, waiting: 5, kv: -1, srv: -1,
		},
		{
			name:    "NaN, Inf and negative samples ignored",
			body:    "vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_running{engine=\"1\"} 3\nvllm:num_requests_waiting +Inf\nvllm:kv_cache_usage_perc -0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 1.5\n",
			running: 3, waiting: -1, kv: 1, srv: -1,
		},
		{
			name: "newest lora series wins, empty lists, escaped quote",
			body: `vllm:num_requests_waiting 0
vllm:lora_requests_info{running_lora_adapters="",waiting_lora_adapters="",max_lora="8"} 1.76e+09
vllm:lora_requests_info{waiting_lora_adapters="a\"b, c",max_lora="8",running_lora_adapters=""} 1.77e+09
vllm:lora_requests_info{max_lora="8",running_lora_adapters="old",waiting_lora_adapters=""} 1.75e+09
`,
			running: -1, waiting: 0, kv: -1, srv: -1, maxLoRA: 8, waitLoRA: []string{`a"b`, "c"},
		},
		{
			name:    "brace inside a quoted label value",
			body:    "vllm:num_requests_running{model_name=\"we}ird\",engine=\"0\"} 7\n",
			running: 7, waiting: -1, kv: -1, srv: -1,
		},
		{
			name: "lora only is not load",
			body: "vllm:lora_requests_info{max_lora=\"1\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1\n",
			err:  ErrNoLoad,
		},
		{name: "empty", body: "", err: ErrNoLoad},
		{name: "garbage", body: "\x00\xff{{{ vllm: }}}\n", err: ErrNoLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseMetrics([]byte(tt.body), t0)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Running != tt.running || l.Waiting != tt.waiting || l.ServerLoad != tt.srv || l.KVUse != tt.kv {
				t.Errorf("got running %d waiting %d srv %d kv %g, want %d %d %d %g",
					l.Running, l.Waiting, l.ServerLoad, l.KVUse, tt.running, tt.waiting, tt.srv, tt.kv)
			}
			if l.MaxLoRA != tt.maxLoRA || !slices.Equal(l.RunningLoRAs, tt.runLoRA) || !slices.Equal(l.WaitingLoRAs, tt.waitLoRA) {
				t.Errorf("lora = %d %q %q, want %d %q %q", l.MaxLoRA, l.RunningLoRAs, l.WaitingLoRAs, tt.maxLoRA, tt.runLoRA, tt.waitLoRA)
			}
			if !l.At.Equal(t0) || l.Source != SourceNone {
				t.Errorf("At %v Source %v", l.At, l.Source)
			}
		})
	}
}

func TestParseMetricsRealistic(t *testing.T) {
	body := vllmMetrics(2, []int{12, 5}, []int{3, 0}, []float64{0.4137, 0.9})
	l, err := ParseMetrics(body, t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Running != 17 || l.Waiting != 3 || l.KVUse != 0.9 || l.Queue() != 20 {
		t.Errorf("got %+v", l)
	}
	if l.MaxLoRA != 4 || !slices.Equal(l.RunningLoRAs, []string{"sql-lora", "chat-lora"}) {
		t.Errorf("lora %d %q", l.MaxLoRA, l.RunningLoRAs)
	}
	if want := 2 * (1.234567e+06 + 9.87654e+05); l.Tokens != want { // two engines
		t.Errorf("Tokens = %v, want prompt + generation tokens %v", l.Tokens, want)
	}
	// No request_prefill_kv_computed_tokens here: the prompt tokens'
	// histogram stands in; both sums over the two engines.
	if l.PrefillSeconds != 2*9.75e-06 || l.PrefillTokens != 2*9.75e-06 {
		t.Errorf("prefill counters %v s, %v tokens", l.PrefillSeconds, l.PrefillTokens)
	}
	if n := len(realisticMetrics()); n < 25<<10 || n > 40<<10 {
		t.Errorf("realistic body is %d bytes, want about 30 KB", n)
	}
	// The testdata copy is what the fuzz seeds and external tools use.
	want, err := os.ReadFile(filepath.Join("testdata", "vllm_metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, realisticMetrics()) {
		t.Error("testdata/vllm_metrics.txt is out of date with vllmMetrics")
	}
}

func TestParseMetricsDoesNotAlias(t *testing.T) {
	body := []byte("vllm:num_requests_waiting 1\nvllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"abc\",waiting_lora_adapters=\"\"} 1\n")
	l, err := ParseMetrics(body, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	if l.RunningLoRAs[0] != "abc" {
		t.Errorf("adapter name aliases the body: %q", l.RunningLoRAs[0])
	}
}

func TestParseMetricsTooLarge(t *testing.T) {
	body := bytes.Repeat([]byte("# padding line of a huge scrape\n"), MaxMetricsBytes/32+1)
	if _, err := ParseMetrics(body, t0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestParseFloat(t *testing.T) {
	for _, s := range []string{"0", "8.0", "12.", "0.4137", "9.75e-06", "1.75e+09", "1.7537953269352946e+09", "123456789012345", "0.000000000000001", "-3", "+5", "NaN", "+Inf", "1e400", ".", "", "1.2.3", "abc"} {
		got, gerr := parseFloat([]byte(s))
		want, werr := strconvParse(s)
		if (gerr == nil) != (werr == nil) || (gerr == nil && got != want && !(math.IsNaN(got) && math.IsNaN(want))) {
			t.Errorf("parseFloat(%q) = %v, %v; strconv = %v, %v", s, got, gerr, want, werr)
		}
	}
}

// FuzzParseMetrics states the parser's contract on arbitrary input: it never
// panics; on success at least one load family was read, counts are -1 or
// non-negative, KVUse is -1 or in [0,1], adapter names are non-empty and
// trimmed.
func FuzzParseMetrics(f *testing.F) {
	f.Add(realisticMetrics())
	f.Add(vllmMetrics(3, []int{1, 2, 3}, []int{0, 0, 9}, []float64{0, 0.5, 1}))
	f.Add([]byte("vllm:num_requests_running{engine=\"0\"} 1\n"))
	f.Add([]byte("vllm:lora_requests_info{max_lora=\"1\",running_lora_adapters=\"a,,b \",waiting_lora_adapters=\"\\\\\"} 1\nvllm:kv_cache_usage_perc 0.5\n"))
	f.Add([]byte("vllm:num_requests_waiting{a=\"}\\\"\"} 1e308\nvllm:num_requests_waiting 1e308\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := ParseMetrics(body, t0)
		if err != nil {
			return
		}
		if l.Running < -1 || l.Waiting < -1 || l.ServerLoad != -1 || l.MaxLoRA < 0 {
			t.Fatalf("bad counts %+v", l)
		}
		if l.KVUse != -1 && (l.KVUse < 0 || l.KVUse > 1) {
			t.Fatalf("bad KVUse %v", l.KVUse)
		}
		if l.Running == -1 && l.Waiting == -1 && l.KVUse == -1 {
			t.Fatal("success without any load family")
		}
		for _, a := range append(slices.Clone(l.RunningLoRAs), l.WaitingLoRAs...) {
			if a == "" || a != strings.TrimSpace(a) {
				t.Fatalf("bad adapter %q", a)
			}
		}
	})
}

func BenchmarkParseMetrics(b *testing.B) {
	body := realisticMetrics()
	b.Run("probe", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseMetrics(body, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("expfmt", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			p := expfmt.NewTextParser(model.LegacyValidation)
			fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if fams["vllm:num_requests_running"] == nil {
				b.Fatal("family missing")
			}
		}
	})
}

func strconvParse(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

func TestParseMetricsBaseModel(t *testing.T) {
	body := []byte("# HELP x\nvllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 2.0\n" +
		"vllm:num_requests_waiting{model_name=\"other\",engine=\"0\"} 1.0\n")
	l, err := ParseMetrics(body, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if l.BaseModel != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Fatalf("BaseModel = %q, want the model_name of the first load sample", l.BaseModel)
	}
	l, _ = ParseMetrics([]byte("vllm:num_requests_running 2.0\n"), time.Unix(1, 0))
	if l.BaseModel != "" {
		t.Fatalf("BaseModel = %q without labels, want empty", l.BaseModel)
	}
}

// Tokens sums the two token counters over every series (one per engine),
// ignores negative samples, and stays 0 (unknown) without them.
func TestParseMetricsTokens(t *testing.T) {
	tests := []struct {
		body string
		want float64
	}{
		{"vllm:num_requests_running 1\n", 0},
		{"vllm:num_requests_running 1\nvllm:generation_tokens_total 7\n", 7},
		{"vllm:num_requests_running 1\nvllm:prompt_tokens_total{engine=\"0\"} 5\nvllm:prompt_tokens_total{engine=\"1\"} 6\nvllm:generation_tokens_total{engine=\"0\"} 1e+10\n", 1e10 + 11},
		{"vllm:num_requests_running 1\nvllm:prompt_tokens_total -5\nvllm:generation_tokens_total 3\n", 3},
		// Not the counters: their _created gauges, another family.
		{"vllm:num_requests_running 1\nvllm:prompt_tokens_created 1.75e+09\nvllm:prefix_cache_queries_total 9\n", 0},
	}
	for _, tc := range tests {
		l, err := ParseMetrics([]byte(tc.body), t0)
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		if l.Tokens != tc.want {
			t.Errorf("%q: Tokens = %v, want %v", tc.body, l.Tokens, tc.want)
		}
	}
}

func TestParseMetricsPrefillCounters(t *testing.T) {
	const gauges = "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
	cases := []struct {
		name       string
		body       string
		secs, toks float64
	}{
		{"computed tokens preferred over prompt tokens",
			"vllm:request_prefill_time_seconds_sum{engine=\"0\"} 12.5\nvllm:request_prompt_tokens_sum{engine=\"0\"} 9000\nvllm:request_prefill_kv_computed_tokens_sum{engine=\"0\"} 4000\n", 12.5, 4000},
		{"prompt tokens when computed is absent",
			"vllm:request_prompt_tokens_sum 9000\nvllm:request_prefill_time_seconds_sum 12.5\n", 12.5, 9000},
		{"summed over engines",
			"vllm:request_prefill_time_seconds_sum{engine=\"0\"} 1\nvllm:request_prefill_time_seconds_sum{engine=\"1\"} 2\nvllm:request_prefill_kv_computed_tokens_sum{engine=\"0\"} 10\nvllm:request_prefill_kv_computed_tokens_sum{engine=\"1\"} 20\n", 3, 30},
		{"no time: nothing", "vllm:request_prefill_kv_computed_tokens_sum 4000\n", 0, 0},
		{"no tokens: nothing", "vllm:request_prefill_time_seconds_sum 3\n", 0, 0},
		{"negative, NaN and huge sums ignored",
			"vllm:request_prefill_time_seconds_sum -3\nvllm:request_prefill_time_seconds_sum NaN\nvllm:request_prefill_time_seconds_sum 2\nvllm:request_prefill_kv_computed_tokens_sum 1e300\nvllm:request_prefill_kv_computed_tokens_sum +Inf\nvllm:request_prefill_kv_computed_tokens_sum 7\n", 2, 7},
		{"buckets and counts are not sums",
			"vllm:request_prefill_time_seconds_bucket{le=\"+Inf\"} 5\nvllm:request_prefill_time_seconds_count 5\nvllm:request_prompt_tokens_count 5\n", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ParseMetrics([]byte(gauges+tc.body), t0)
			if err != nil {
				t.Fatal(err)
			}
			if l.PrefillSeconds != tc.secs || l.PrefillTokens != tc.toks {
				t.Errorf("got %v s, %v tokens; want %v, %v", l.PrefillSeconds, l.PrefillTokens, tc.secs, tc.toks)
			}
		})
	}
}
