package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// valid returns a Default() config that passes Validate.
func valid() *Config {
	c := Default()
	c.Backends.Static = []string{"http://127.0.0.1:8001", "http://127.0.0.1:8002"}
	return c
}

// problems returns the Errors in err, failing the test if it is something
// else.
func problems(t *testing.T, err error) Errors {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not config.Errors", err, err)
	}
	return errs
}

func TestDefaultPlusBackendsIsValid(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid(): %v", err)
	}
	err := Default().Validate()
	errs := problems(t, err)
	if len(errs) != 1 || errs[0].String() != "backends: set static, dns or kubernetes" {
		t.Fatalf("Default().Validate() = %q, want only the backends problem", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(c *Config)
		want string // the exact "path: msg" line, or its prefix when it ends in "..."
	}{
		{"listen", func(c *Config) { c.Server.Listen = "8080" }, `server.listen: must be host:port, got "8080"`},
		{"listen port", func(c *Config) { c.Server.Listen = ":http" }, `server.listen: port must be a number in 0..65535, got "http"`},
		{"admin_listen", func(c *Config) { c.Server.AdminListen = "localhost" }, `server.admin_listen: must be host:port...`},
		{"admin same as listen", func(c *Config) { c.Server.AdminListen = c.Server.Listen }, `server.admin_listen: ":8080" overlaps server.listen ":8080"...`},
		{"max_body_bytes", func(c *Config) { c.Server.MaxBodyBytes = 0 }, `server.max_body_bytes: must be >= 1`},
		{"max_header_bytes", func(c *Config) { c.Server.MaxHeaderBytes = -1 }, `server.max_header_bytes: must be >= 1`},
		{"read_timeout", func(c *Config) { c.Server.ReadTimeout = 0 }, `server.read_timeout: must be > 0`},
		{"shutdown_grace", func(c *Config) { c.Server.ShutdownGrace = -1 }, `server.shutdown_grace: must be >= 0`},
		{"no backends", func(c *Config) { c.Backends.Static = nil }, `backends: set static, dns or kubernetes`},
		{"both backends", func(c *Config) { c.Backends.DNS = "vllm:8000" }, `backends: set only one of static, dns and kubernetes`},
		{"static scheme", func(c *Config) { c.Backends.Static = append(c.Backends.Static, "ftp://h:1") }, `backends.static[2]: must be http(s)://host:port, got "ftp://h:1": scheme must be http or https`},
		{"static no scheme", func(c *Config) { c.Backends.Static[1] = "127.0.0.1:8000" }, `backends.static[1]: must be http(s)://host:port...`},
		{"static port", func(c *Config) { c.Backends.Static[0] = "http://vllm" }, `backends.static[0]: must be http(s)://host:port, got "http://vllm": the port is required`},
		{"static path", func(c *Config) { c.Backends.Static[0] = "http://vllm:8000/v1" }, `backends.static[0]: must be http(s)://host:port, got "http://vllm:8000/v1": no path is allowed...`},
		{"static query", func(c *Config) { c.Backends.Static[0] = "http://vllm:8000/?a=b" }, `backends.static[0]: must be http(s)://host:port, got "http://vllm:8000/?a=b": no query or fragment is allowed`},
		{"static user", func(c *Config) { c.Backends.Static[0] = "http://u:p@vllm:8000" }, `backends.static[0]: must be http(s)://host:port, got "http://u:p@vllm:8000": user info is not allowed`},
		{"static bad port", func(c *Config) { c.Backends.Static[0] = "http://vllm:0" }, `backends.static[0]: must be http(s)://host:port, got "http://vllm:0": port must be in 1..65535`},
		{"static unparsable", func(c *Config) { c.Backends.Static[0] = "http://[::1" }, `backends.static[0]: must be http(s)://host:port, got "http://[::1"...`},
		{"static duplicate", func(c *Config) { c.Backends.Static[1] = "http://127.0.0.1:8001/" }, `backends.static[1]: duplicate of backends.static[0]`},
		{"dns", func(c *Config) { c.Backends.Static = nil; c.Backends.DNS = "vllm" }, `backends.dns: must be host:port, got "vllm"`},
		{"dns no host", func(c *Config) { c.Backends.Static = nil; c.Backends.DNS = ":8000" }, `backends.dns: must be host:port with a host, got ":8000"`},
		{"dns port", func(c *Config) { c.Backends.Static = nil; c.Backends.DNS = "vllm:0" }, `backends.dns: port must be a number in 1..65535, got "0"`},
		{"dns_refresh", func(c *Config) { c.Backends.DNSRefresh = 0 }, `backends.dns_refresh: must be > 0`},
		{"scheme", func(c *Config) { c.Backends.Scheme = "tls" }, `backends.scheme: must be http or https, got "tls"`},
		{"scheme with static", func(c *Config) { c.Backends.Scheme = SchemeHTTPS }, `backends.scheme: applies to backends found by dns or kubernetes; static URLs carry their own (write https://host:port)`},
		{"connect_timeout", func(c *Config) { c.Upstream.ConnectTimeout = 0 }, `upstream.connect_timeout: must be > 0`},
		{"first_byte_timeout", func(c *Config) { c.Upstream.FirstByteTimeout = -1 }, `upstream.first_byte_timeout: must be > 0`},
		{"idle_timeout", func(c *Config) { c.Upstream.IdleTimeout = 0 }, `upstream.idle_timeout: must be > 0`},
		{"max_conns_per_backend", func(c *Config) { c.Upstream.MaxConnsPerBackend = 0 }, `upstream.max_conns_per_backend: must be >= 1`},
		{"idle_conn_ttl zero", func(c *Config) { c.Upstream.IdleConnTTL = 0 }, `upstream.idle_conn_ttl: must be > 0`},
		{"idle_conn_ttl vllm", func(c *Config) { c.Upstream.IdleConnTTL = Duration(5 * time.Second) }, `upstream.idle_conn_ttl: should be < 5s (vLLM closes idle connections at 5s)`},
		{"retries", func(c *Config) { c.Upstream.Retries = -1 }, `upstream.retries: must be >= 0`},
		{"retries above bound", func(c *Config) { c.Upstream.Retries = MaxRetries + 1 }, `upstream.retries: must be <= 4`},
		{"policy", func(c *Config) { c.Route.Policy = "p2c" }, `route.policy: must be one of probe, cached, least_inflight, round_robin, random, got "p2c"`},
		{"d negative", func(c *Config) { c.Route.D = -1 }, `route.d: must be auto (0) or 1..64, got -1`},
		{"d above bound", func(c *Config) { c.Route.D = 100 }, `route.d: must be auto (0) or 1..64, got 100`},
		{"pod_speed above 1", func(c *Config) { c.Route.Load.PodSpeed = 1.5 }, `route.load.pod_speed: must be between 0 and 1, got 1.5`},
		{"pod_speed negative", func(c *Config) { c.Route.Load.PodSpeed = -0.1 }, `route.load.pod_speed: must be between 0 and 1, got -0.1`},
		{"pod_speed_samples negative", func(c *Config) { c.Route.Load.PodSpeedSamples = -1 }, `route.load.pod_speed_samples: must be between 0 (off) and 1e6, got -1`},
		{"pod_speed_samples NaN", func(c *Config) { c.Route.Load.PodSpeedSamples = math.NaN() }, `route.load.pod_speed_samples: must be between 0 (off) and 1e6, got NaN`},
		{"pod_speed_foreign over 1", func(c *Config) { c.Route.Load.PodSpeedForeign = 1.5 }, `route.load.pod_speed_foreign: must be between 0 (always) and 1, got 1.5`},
		{"pod_speed_foreign NaN", func(c *Config) { c.Route.Load.PodSpeedForeign = math.NaN() }, `route.load.pod_speed_foreign: must be between 0 (always) and 1, got NaN`},
		{"hedges above bound", func(c *Config) { c.Probe.Hedges = 65 }, `probe.hedges: must be <= 64`},
		{"weight queue", func(c *Config) { c.Route.Weights.Queue = -1 }, `route.weights.queue: must be a finite number >= 0`},
		{"weight kv nan", func(c *Config) { c.Route.Weights.KVCache = nan() }, `route.weights.kv_cache: must be a finite number >= 0`},
		{"weight prefix inf", func(c *Config) { c.Route.Weights.Prefix = inf() }, `route.weights.prefix: must be a finite number >= 0`},
		{"weight lora", func(c *Config) { c.Route.Weights.LoRA = -0.5 }, `route.weights.lora: must be a finite number >= 0`},
		{"max_waiting", func(c *Config) { c.Route.Saturation.MaxWaiting = 0 }, `route.saturation.max_waiting: must be >= 1`},
		{"max_kv_cache zero", func(c *Config) { c.Route.Saturation.MaxKVCache = 0 }, `route.saturation.max_kv_cache: must be in (0, 1]`},
		{"max_kv_cache above 1", func(c *Config) { c.Route.Saturation.MaxKVCache = 1.01 }, `route.saturation.max_kv_cache: must be in (0, 1]`},
		{"block_chars", func(c *Config) { c.Route.Prefix.BlockChars = 0 }, `route.prefix.block_chars: must be >= 1`},
		{"max_blocks", func(c *Config) { c.Route.Prefix.MaxBlocks = 0 }, `route.prefix.max_blocks: must be >= 1`},
		{"entries_per_backend", func(c *Config) { c.Route.Prefix.EntriesPerBackend = 0 }, `route.prefix.entries_per_backend: must be >= 1`},
		{"index_entries", func(c *Config) { c.Route.Prefix.IndexEntries = 0 }, `route.prefix.index_entries: must be >= 1`},
		{"index_entries too many", func(c *Config) { c.Route.Prefix.IndexEntries = 1<<24 + 1 }, `route.prefix.index_entries: must be <= 16777216`},
		{"endpoint", func(c *Config) { c.Probe.Endpoint = "orca" }, `probe.endpoint: must be metrics or load, got "orca"`},
		{"deadline", func(c *Config) { c.Probe.Deadline = 0 }, `probe.deadline: must be > 0`},
		{"hedge_after", func(c *Config) { c.Probe.HedgeAfter = "soon" }, `probe.hedge_after: must be a duration or "auto", got "soon"`},
		{"hedge_after negative", func(c *Config) { c.Probe.HedgeAfter = "-1ms" }, `probe.hedge_after: must be a duration or "auto", got "-1ms"`},
		{"hedge_after past deadline", func(c *Config) { c.Probe.HedgeAfter = "5ms" }, `probe.hedge_after: must be < probe.deadline`},
		{"hedges", func(c *Config) { c.Probe.Hedges = -1 }, `probe.hedges: must be >= 0`},
		{"quorum negative", func(c *Config) { c.Probe.Quorum = -2 }, `probe.quorum: must be auto or >= 0 (0: d-1), got -2`},
		{"fresh_for", func(c *Config) { c.Probe.FreshFor = -1 }, `probe.fresh_for: must be >= 0`},
		{"scrape interval", func(c *Config) { c.Scrape.Interval = 0 }, `scrape.interval: must be > 0`},
		{"scrape interval outside", func(c *Config) { c.Scrape.Interval = Duration(10 * time.Second) }, `scrape.interval: must be within [scrape.min_interval, scrape.max_interval] when scrape.adaptive is true`},
		{"min_interval", func(c *Config) { c.Scrape.MinInterval = 0 }, `scrape.min_interval: must be > 0`},
		{"max_interval", func(c *Config) { c.Scrape.MaxInterval = -1 }, `scrape.max_interval: must be > 0`},
		{"min above max", func(c *Config) { c.Scrape.MinInterval = Duration(6 * time.Second) }, `scrape.min_interval: must be <= scrape.max_interval`},
		{"scrape timeout", func(c *Config) { c.Scrape.Timeout = 0 }, `scrape.timeout: must be > 0`},
		{"stale_after", func(c *Config) { c.Scrape.StaleAfter = 0 }, `scrape.stale_after: must be > 0`},
		{"foreign_change", func(c *Config) { c.Scrape.ForeignChange = -1 }, `scrape.foreign_change: must be a finite number >= 0`},
		{"foreign_budget", func(c *Config) { c.Scrape.ForeignBudget = math.Inf(1) }, `scrape.foreign_budget: must be a finite number >= 0`},
		{"consecutive_failures", func(c *Config) { c.Breaker.ConsecutiveFailures = 0 }, `breaker.consecutive_failures: must be >= 1`},
		{"open_for", func(c *Config) { c.Breaker.OpenFor = 0 }, `breaker.open_for: must be > 0`},
		{"half_open_requests", func(c *Config) { c.Breaker.HalfOpenRequests = 0 }, `breaker.half_open_requests: must be >= 1`},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, `log.level: must be one of debug, info, warn, error, got "trace"`},
		{"log format", func(c *Config) { c.Log.Format = "text" }, `log.format: must be json or console, got "text"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mod(c)
			errs := problems(t, c.Validate())
			if len(errs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(errs), errs)
			}
			got := errs[0].String()
			if want, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(got, want) {
					t.Fatalf("got  %q\nwant %q...", got, want)
				}
			} else if got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
			path, _, _ := strings.Cut(tt.want, ":")
			if errs[0].Path != path {
				t.Fatalf("Path = %q, want %q", errs[0].Path, path)
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }
func inf() float64 { z := 0.0; return 1 / z }

func TestValidateReportsAllProblems(t *testing.T) {
	c := valid()
	c.Route.D = -1
	c.Probe.Endpoint = "x"
	c.Log.Level = "x"
	errs := problems(t, c.Validate())
	var paths []string
	for _, p := range errs {
		paths = append(paths, p.Path)
	}
	want := []string{"route.d", "probe.endpoint", "log.level"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
	if got := strings.Count(errs.Error(), "\n"); got != 2 {
		t.Fatalf("Error() has %d newlines, want 2:\n%s", got, errs.Error())
	}
}

func TestValidAccepts(t *testing.T) {
	tests := []struct {
		name string
		mod  func(c *Config)
	}{
		{"dns only", func(c *Config) { c.Backends.Static = nil; c.Backends.DNS = "vllm.models.svc.cluster.local:8000" }},
		{"https with slash", func(c *Config) { c.Backends.Static = []string{"https://[::1]:8443/"} }},
		{"fixed hedge", func(c *Config) { c.Probe.HedgeAfter = "1500us" }},
		{"zero hedge", func(c *Config) { c.Probe.HedgeAfter = "0s" }},
		{"quorum d+hedges", func(c *Config) { c.Probe.Quorum = 3 }},
		{"ephemeral listeners", func(c *Config) { c.Server.Listen = "127.0.0.1:0"; c.Server.AdminListen = "127.0.0.1:0" }},
		{"not adaptive", func(c *Config) { c.Scrape.Adaptive = false; c.Scrape.Interval = Duration(time.Minute) }},
		{"kv 1", func(c *Config) { c.Route.Saturation.MaxKVCache = 1 }},
		{"all policies", func(c *Config) { c.Route.Policy = PolicyRandom }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mod(c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

const base = "backends:\n  static: [\"http://127.0.0.1:8001\"]\n"

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every problem, exactly
	}{
		{"unknown key suggests", base + "probe:\n  dedline: 5ms\n", []string{"unknown key probe.dedline (did you mean probe.deadline?)"}},
		{"unknown key no suggestion", base + "probe:\n  zzzzzz: 1\n", []string{"unknown key probe.zzzzzz"}},
		{"unknown section", base + "prob:\n  deadline: 5ms\n", []string{"unknown key prob (did you mean probe?)"}},
		{"nested unknown key", base + "route:\n  saturation:\n    max_kv: 0.9\n", []string{"unknown key route.saturation.max_kv"}},
		{"nested typo", base + "route:\n  weights:\n    kvcache: 1\n", []string{"unknown key route.weights.kvcache (did you mean route.weights.kv_cache?)"}},
		{"key in wrong section", base + "probe:\n  d: 3\n", []string{"unknown key probe.d (did you mean route.d?)"}},
		{"duplicate key", base + "route:\n  d: 2\n  d: 3\n", []string{"duplicate key route.d"}},
		{"bad duration", base + "probe:\n  deadline: 5 ms\n", []string{`probe.deadline: invalid duration "5 ms"`}},
		{"duration without unit", base + "scrape:\n  interval: 5\n", []string{`scrape.interval: invalid duration "5"`}},
		{"duration as map", base + "scrape:\n  interval: {a: 1}\n", []string{`scrape.interval: must be a duration such as "5ms" or "2s"`}},
		{"int type", base + "route:\n  d: two\n", []string{"route.d: must be an integer or auto"}},
		{"int from float", base + "route:\n  d: 2.5\n", []string{"route.d: must be an integer"}},
		{"int quoted", base + "route:\n  d: \"2\"\n", []string{"route.d: must be an integer or auto"}},
		{"int type no auto", base + "route:\n  prefix:\n    max_blocks: auto\n", []string{"route.prefix.max_blocks: must be an integer"}},
		{"auto as list", base + "probe:\n  quorum: [auto]\n", []string{"probe.quorum: must be an integer"}},
		{"quorum below auto", base + "probe:\n  quorum: -2\n", []string{"probe.quorum: must be auto or >= 0 (0: d-1), got -2"}},
		{"int overflow", base + "server:\n  max_header_bytes: 99999999999999999999\n", []string{"server.max_header_bytes: must be an integer"}},
		{"bool type", base + "log:\n  access: yes\n", []string{"log.access: must be true or false"}},
		{"float type", base + "route:\n  weights:\n    queue: high\n", []string{"route.weights.queue: must be a number"}},
		{"string type", base + "log:\n  level: [info]\n", []string{"log.level: must be a string"}},
		{"section type", base + "probe: 5ms\n", []string{"probe: must be a mapping"}},
		{"list type", "backends:\n  static: http://127.0.0.1:8001\n", []string{"backends.static: must be a list"}},
		{"list element", "backends:\n  static: [\"http://127.0.0.1:8001\", {a: b}]\n", []string{"backends.static[1]: must be a string"}},
		{"root type", "- a\n- b\n", []string{"config must be a mapping of sections (server:, backends:, ...)", "backends: set static, dns or kubernetes"}},
		{"merge key", base + "route:\n  <<: {d: 3}\n", []string{"route.<<: merge keys are not supported"}},
		{"decode and validate together", base + "route:\n  d: -1\n  policy: x\nprobe:\n  dedline: 1ms\n", []string{
			"unknown key probe.dedline (did you mean probe.deadline?)",
			`route.policy: must be one of probe, cached, least_inflight, round_robin, random, got "x"`,
			"route.d: must be auto (0) or 1..64, got -1",
		}},
		{"empty file", "", []string{"backends: set static, dns or kubernetes"}},
		{"two documents", base + "---\n" + base, []string{"config must be a single YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if c != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			var got []string
			for _, p := range problems(t, err) {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseSyntaxError(t *testing.T) {
	_, err := Parse([]byte("route:\n  d: [1\n"))
	errs := problems(t, err)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].String(), "invalid YAML: line ") {
		t.Fatalf("got %q", errs)
	}
}

func TestParseKeepsDefaultsAndNulls(t *testing.T) {
	c, err := Parse([]byte(base + "route:\n  d: 3\n  policy: ~\nprobe:\n  hedge_after: 1ms\nscrape:\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Backends.Static = []string{"http://127.0.0.1:8001"}
	want.Route.D = 3
	want.Probe.HedgeAfter = "1ms"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestParseAliases(t *testing.T) {
	_, err := Parse([]byte("x: &t 3\n"))
	if err == nil {
		t.Fatal("unknown key x accepted")
	}
	c, err := Parse([]byte("backends:\n  static: [&u \"http://h:1\"]\nroute:\n  d: &d 3\nprobe:\n  quorum: *d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Probe.Quorum != 3 {
		t.Fatalf("quorum = %d, want 3 through the alias", c.Probe.Quorum)
	}
}

// TestRoundTrip marshals a valid, non-default config and parses it back.
func TestRoundTrip(t *testing.T) {
	c := valid()
	c.Server.Listen = "0.0.0.0:8081"
	c.Server.MaxBodyBytes = 1 << 30
	c.Backends.Static = nil
	c.Backends.DNS = "vllm.ns.svc.cluster.local:8000"
	c.Backends.DNSRefresh = Duration(1500 * time.Millisecond)
	c.Upstream.Retries = 0
	c.Route.Policy = PolicyLeastInflight
	c.Route.D = 3
	c.Route.Weights = Weights{Queue: 0.5, KVCache: 0, Prefix: 1e-3, LoRA: 7}
	c.Route.Saturation = Saturation{MaxWaiting: 8, MaxKVCache: 1, Shed: true}
	c.Route.Prefix.BlockChars = 128
	c.Probe = Probe{Endpoint: EndpointLoad, Deadline: Duration(10 * time.Millisecond), HedgeAfter: "2ms", Hedges: 2, Quorum: 4, FreshFor: 0, ORCA: false}
	c.Scrape.Adaptive = false
	c.Scrape.Interval = Duration(10 * time.Second)
	c.Breaker = Breaker{ConsecutiveFailures: 3, OpenFor: Duration(250 * time.Millisecond), HalfOpenRequests: 2}
	c.Log = Log{Level: "debug", Format: "console", Access: false}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v\n%s", got, c, data)
	}
}

// TestRepoConfigYAML keeps config.yaml at the repository root in step with
// Default(): it must parse, validate, and differ from Default() only in
// backends.
func TestRepoConfigYAML(t *testing.T) {
	path := filepath.Join("..", "..", "config.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Backends.Static = []string{"http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003", "http://127.0.0.1:8004"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config.yaml differs from Default():\n got %+v\nwant %+v", c, want)
	}

	// Every key of the schema appears in the file, so that it documents all.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		if n.Kind == yaml.DocumentNode {
			walk(prefix, n.Content[0])
			return
		}
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i < len(n.Content); i += 2 {
			p := join(prefix, n.Content[i].Value)
			present[p] = true
			walk(p, n.Content[i+1])
		}
	}
	walk("", &root)
	for _, p := range allPaths() {
		if !present[p] {
			t.Errorf("config.yaml does not document %s", p)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want os.ErrNotExist", err)
	}
}

func TestDurationUnmarshalYAML(t *testing.T) {
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 1m30s\n"), &v); err != nil || v.D.D() != 90*time.Second {
		t.Fatalf("got %v, %v", v.D, err)
	}
	err := yaml.Unmarshal([]byte("d: 5 ms\n"), &v)
	if err == nil || !strings.Contains(err.Error(), `invalid duration "5 ms"`) {
		t.Fatalf("err = %v", err)
	}
	if s := Duration(5 * time.Millisecond).String(); s != "5ms" {
		t.Fatalf("String() = %q", s)
	}
}

func TestProbeHelpers(t *testing.T) {
	tests := []struct {
		hedge     string
		wantD     time.Duration
		wantAuto  bool
		wantErr   bool
		quorum, d int
		wantQ     int
	}{
		{"auto", 0, true, false, 0, 2, 1},
		{"2ms", 2 * time.Millisecond, false, false, 0, 1, 1},
		{"0s", 0, false, false, 0, 4, 3},
		{"junk", 0, false, true, 3, 2, 3},
		{"-1ms", 0, false, true, 0, 3, 2},
		{"auto", 0, true, false, QuorumAuto, 3, 2}, // auto beside an explicit route.d: 2, as before the rule
	}
	for _, tt := range tests {
		p := Probe{HedgeAfter: tt.hedge, Quorum: tt.quorum}
		if d, auto, err := p.HedgeDelay(); d != tt.wantD || auto != tt.wantAuto || (err != nil) != tt.wantErr {
			t.Errorf("HedgeDelay(%q) = %v, %v, %v; want %v, %v, error %v", tt.hedge, d, auto, err, tt.wantD, tt.wantAuto, tt.wantErr)
		}
		if q := p.QuorumFor(tt.d); q != tt.wantQ {
			t.Errorf("Quorum %d QuorumFor(%d) = %d, want %d", tt.quorum, tt.d, q, tt.wantQ)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"dedline", "deadline", 1}, {"kitten", "sitting", 3}, {"abc", "", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// A quorum above route.d + probe.hedges means "wait for every probe": it is
// valid, so lowering route.d never trips over the default quorum.
func TestQuorumAboveProbeCountIsValid(t *testing.T) {
	c := valid()
	c.Route.D = 1
	c.Probe.Hedges = 0
	c.Probe.Quorum = 2
	if err := c.Validate(); err != nil {
		t.Fatalf("quorum above d + hedges rejected: %v", err)
	}
}

func TestBackendAddr(t *testing.T) {
	for _, c := range []struct {
		raw     string
		addr    string
		tls, ok bool
	}{
		{"http://10.0.0.7:8000", "10.0.0.7:8000", false, true},
		{"https://vllm.example:443/", "vllm.example:443", true, true},
		{"http://[::1]:8000", "[::1]:8000", false, true},
		{"10.0.0.8:8000", "10.0.0.8:8000", false, true}, // from DNS discovery
		{"ftp://x:1", "", false, false},
		{"http://x:1/v1", "", false, false},
		{"", "", false, false},
	} {
		addr, tls, ok := BackendAddr(c.raw)
		if addr != c.addr || tls != c.tls || ok != c.ok {
			t.Errorf("BackendAddr(%q) = %q, %v, %v; want %q, %v, %v", c.raw, addr, tls, ok, c.addr, c.tls, c.ok)
		}
		// Validate accepts a static URL exactly when BackendAddr does.
		if strings.Contains(c.raw, "://") {
			_, msg := checkBackendURL(c.raw)
			if (msg == "") != c.ok {
				t.Errorf("%q: Validate and BackendAddr disagree (%q)", c.raw, msg)
			}
		}
	}
}

// TestEventLoopIsLinuxOnly: server.event_loop is refused, naming the key,
// on a platform without event loops, and accepted on Linux.
func TestEventLoopIsLinuxOnly(t *testing.T) {
	defer func(g string) { goos = g }(goos)
	c := valid()
	c.Server.EventLoop = true
	for _, tc := range []struct{ goos, want string }{
		{"linux", ""},
		{"darwin", "server.event_loop: event loops are supported on Linux only (this is darwin): set it to false"},
	} {
		goos = tc.goos
		err := c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.goos, err)
			}
			continue
		}
		errs := problems(t, err)
		if len(errs) != 1 || errs[0].String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.goos, err, tc.want)
		}
	}
	if Default().Server.EventLoop {
		t.Error("server.event_loop defaults to true, want false")
	}
}
