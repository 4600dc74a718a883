// Package config holds probegate's configuration: the typed sections of
// config.yaml, their documented defaults, strict decoding and validation with
// errors that name the YAML path of the offending key.
//
// The section types live here rather than in the packages that consume them
// (route, probe, breaker) so that every package can depend on config without
// an import cycle and so that the whole file can be validated before anything
// starts. Each package reads only its own section.
package config

import "time"

// Duration is a time.Duration that decodes from Go duration syntax ("5ms",
// "2s") in YAML.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is the whole of config.yaml. A Config is immutable once loaded:
// reload builds a new one and publishes it.
type Config struct {
	Server   Server   `yaml:"server"`
	Backends Backends `yaml:"backends"`
	Upstream Upstream `yaml:"upstream"`
	Route    Route    `yaml:"route"`
	Probe    Probe    `yaml:"probe"`
	Scrape   Scrape   `yaml:"scrape"`
	Breaker  Breaker  `yaml:"breaker"`
	Log      Log      `yaml:"log"`
}

// Server configures the client-facing and admin listeners.
type Server struct {
	Listen         string   `yaml:"listen"`           // default ":8080"
	AdminListen    string   `yaml:"admin_listen"`     // default "127.0.0.1:9090"
	MaxBodyBytes   int64    `yaml:"max_body_bytes"`   // default 16 MiB; larger bodies get 413
	MaxHeaderBytes int      `yaml:"max_header_bytes"` // default 64 KiB; larger headers get 431
	ReadTimeout    Duration `yaml:"read_timeout"`     // default 30s: time to read a request's headers and body
	ShutdownGrace  Duration `yaml:"shutdown_grace"`   // default 30s: drain time for in-flight streams on SIGTERM
	// EventLoop serves server.listen on event loops of the proxy's own
	// (internal/evloop: epoll, one OS thread per loop, GOMAXPROCS-1 loops
	// and GOMAXPROCS raised by one) instead of fasthttp's server: a plain
	// non-stream Content-Length exchange is served start to end on a
	// loop; anything else (streams, https backends, the probe policy,
	// refusals with fields of their own) is handed to the fasthttp server
	// on the same connection. Default false. Linux only (Validate refuses
	// it elsewhere). Experimental: the loop path does not yet keep every
	// guarantee of the fasthttp path (session 16's known differences, in
	// bench/results/2026-12-02-s16/evwire and hostile: a first-byte
	// timeout counts against a backend's breaker without the progress
	// rule, so slow long prompts can open a working pod's breaker; an
	// answer cut after its head reaches the client as a truncated 200
	// instead of a 502; chunked and HTTP/1.0 answers are 502; no connect
	// timeout re-pick; a request with two Connection fields is 400), and
	// with the probe policy it is slower than the fasthttp server alone.
	EventLoop bool `yaml:"event_loop"`
}

// Backends names the model servers: a static list, DNS, or Kubernetes
// (exactly one of the three).
type Backends struct {
	Static     []string   `yaml:"static"`      // base URLs, e.g. "http://10.0.0.7:8000"
	DNS        string     `yaml:"dns"`         // "name:port", re-resolved every DNSRefresh (headless Service)
	DNSRefresh Duration   `yaml:"dns_refresh"` // default 5s
	Kubernetes Kubernetes `yaml:"kubernetes"`
	// Scheme of the backends DNS or Kubernetes finds (they are host:port):
	// SchemeHTTP (the default) or SchemeHTTPS (then upstream.tls applies).
	// Static URLs carry their own scheme.
	Scheme string `yaml:"scheme"`
}

// Backend schemes (backends.scheme).
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
)

// Kubernetes discovers the model servers by watching the Kubernetes API:
// either a Service's EndpointSlices or an InferencePool's pods (exactly one
// of Service and InferencePool). It is comparable: a reload restarts the
// watch only when a field changed.
type Kubernetes struct {
	// Service is the name of a Service whose EndpointSlices list the pods.
	Service string `yaml:"service"`
	// InferencePool is the name of an InferencePool
	// (inference.networking.k8s.io/v1) whose selector picks the pods.
	InferencePool string `yaml:"inference_pool"`
	// Namespace of the Service or pool. Default "": the proxy's own
	// namespace in a cluster, else the kubeconfig context's, else "default".
	Namespace string `yaml:"namespace"`
	// Port is the pods' port. With service: the endpoints' port number
	// (default 0: the EndpointSlices' only port). With inference_pool: one of
	// spec.targetPorts (default 0: every target port).
	Port int `yaml:"port"`
	// Kubeconfig is a kubeconfig file for running outside a cluster.
	// Default "": the in-cluster service account.
	Kubeconfig string `yaml:"kubeconfig"`
}

// Enabled reports whether Kubernetes discovery is configured.
func (k Kubernetes) Enabled() bool { return k != Kubernetes{} }

// Upstream configures forwarding to the model servers.
type Upstream struct {
	ConnectTimeout     Duration `yaml:"connect_timeout"`       // default 2s: TCP connect plus, for https, the TLS handshake
	FirstByteTimeout   Duration `yaml:"first_byte_timeout"`    // default 60s: until response headers arrive
	IdleTimeout        Duration `yaml:"idle_timeout"`          // default 60s: max silence inside a streamed body
	MaxConnsPerBackend int      `yaml:"max_conns_per_backend"` // default 1024
	IdleConnTTL        Duration `yaml:"idle_conn_ttl"`         // default 4s (< vLLM's 5s keep-alive)
	Retries            int      `yaml:"retries"`               // default 1, at most MaxRetries: re-picks when nothing reached the backend
	// RetryOnReset: re-pick a request whose connection failed after it was
	// written and before any response byte (default true).
	RetryOnReset bool `yaml:"retry_on_reset"`
	// TLS: the client side of connections to https:// backends (forwarding,
	// probes and scrapes): CA, client certificate, server name.
	TLS UpstreamTLS `yaml:"tls"`
}

// Route configures the routing policy and its scorers.
type Route struct {
	// AllowPaths: the only request paths (and methods) forwarded to the
	// backends, "[METHOD[,METHOD] ]/path" or "/prefix/*" (see
	// ParseAllowRule); default DefaultAllowPaths, vLLM's inference API.
	// ["/*"] forwards everything.
	AllowPaths []string `yaml:"allow_paths"`
	Policy     string   `yaml:"policy"` // probe | cached | least_inflight | round_robin | random; default probe
	// D: candidates sampled per request, 1..MaxD; default DAuto (0, YAML
	// also auto): from the pool's size (AutoSampling, Config.Sampling).
	D          int        `yaml:"d" auto:"0"`
	Weights    Weights    `yaml:"weights"`
	Saturation Saturation `yaml:"saturation"`
	Prefix     Prefix     `yaml:"prefix"`
	// AffinityMaxQueueGap: prefix and LoRA affinity count only for candidates
	// whose queue is at most this many requests longer than the shortest
	// candidate queue (default 2), so a cached prefix never outweighs a
	// backlog.
	AffinityMaxQueueGap int `yaml:"affinity_max_queue_gap"`
	// Load: how load is estimated for the queue scorer (tokens | requests).
	Load LoadModel `yaml:"load"`
}

// Weights are the scorer weights; each scorer yields a score in [0,1].
type Weights struct {
	Queue   float64 `yaml:"queue"`    // default 2
	KVCache float64 `yaml:"kv_cache"` // default 2
	Prefix  float64 `yaml:"prefix"`   // default 3
	LoRA    float64 `yaml:"lora"`     // default 1
}

// Saturation decides when a backend is too loaded to take more work.
type Saturation struct {
	MaxWaiting int     `yaml:"max_waiting"`  // default 64 queued requests
	MaxKVCache float64 `yaml:"max_kv_cache"` // default 0.95
	Shed       bool    `yaml:"shed"`         // default false: when true, 429 if every candidate is saturated
}

// MaxIndexEntries bounds route.prefix.index_entries (16Mi entries, about
// 800 MiB): a larger index would be a typo, not a fleet.
const MaxIndexEntries = 1 << 24

// Prefix configures prompt-prefix affinity.
type Prefix struct {
	BlockChars        int `yaml:"block_chars"`         // default 256
	MaxBlocks         int `yaml:"max_blocks"`          // default 64
	EntriesPerBackend int `yaml:"entries_per_backend"` // default 16384 block hashes (LRU)
	IndexEntries      int `yaml:"index_entries"`       // default 131072 entries of the proxy-wide holder index
}

// Probe configures the synchronous prober.
type Probe struct {
	Endpoint   string   `yaml:"endpoint"`    // metrics | load; default metrics
	Deadline   Duration `yaml:"deadline"`    // default 5ms
	HedgeAfter string   `yaml:"hedge_after"` // duration or "auto"; default "auto"
	Hedges     int      `yaml:"hedges"`      // default 1, at most MaxD
	// Quorum: answers that end probing; 0 = d-1 (at least 1); above
	// d+hedges = every probe. Default QuorumAuto (-1, YAML auto): route.d's
	// rule with route.d auto, else 2 (Config.Sampling).
	Quorum   int      `yaml:"quorum" auto:"-1"`
	FreshFor Duration `yaml:"fresh_for"` // default 2ms
	ORCA     bool     `yaml:"orca"`      // default true
}

// Scrape configures the asynchronous scraper.
type Scrape struct {
	Interval    Duration `yaml:"interval"`     // default 1s
	Adaptive    bool     `yaml:"adaptive"`     // default true
	MinInterval Duration `yaml:"min_interval"` // default 50ms
	MaxInterval Duration `yaml:"max_interval"` // default 1s
	Timeout     Duration `yaml:"timeout"`      // default 1s
	StaleAfter  Duration `yaml:"stale_after"`  // default 2s
	// ForeignChange is, with adaptive, the change in a backend's queue
	// that other clients (not this proxy) may make between two scrapes,
	// in requests: a backend they change faster is scraped sooner. 0
	// turns it off (the interval follows this proxy's own rate alone).
	// Unbounded (foreign_budget 0) its cost grows with the replicas: at
	// 1,024 pods behind 32 replicas (fleetsim) 0.1 scrapes each pod ~190
	// times a second in all, 0.5 ~70, 0 ~32, for p99 TTFT 0.92x / 0.97x /
	// 1 (3 seeds; bench/results/2026-12-02-s15/lead/fleetsim-headline);
	// foreign_budget bounds it.
	ForeignChange float64 `yaml:"foreign_change"` // default 0.1
	// ForeignBudget bounds foreign_change's cost to a backend: the
	// scrapes it may add to those of this proxy's own pace, per request
	// this proxy sends the backend (credited per request, spent per
	// added scrape). All replicas together then add at most this many
	// scrapes per request the backend serves, whatever their number. 0:
	// no bound (foreign_change alone decides). Default
	// DefaultForeignBudget.
	ForeignBudget float64 `yaml:"foreign_budget"`
}

// DefaultForeignBudget is scrape.foreign_budget's default: 40 scrapes per
// request, about twice what foreign_change 0.1 spends on average behind 8
// replicas (fleetsim, 8 and 64 pods: 19 and 14 per request), where it was
// measured (issue 13 session 8): up to there it runs as if unbounded, its
// spells of fast change included, and beyond each pod's added scrapes stay
// at about 16 replicas' worth. fleetsim, 0.8 load, p99 TTFT per seed
// against no budget and scrapes per pod per second (no budget / 40): 8 pods
// R=1 identical, 1.0; 8 pods R=8 1.020 (10 seeds, 6 higher: the seeds'
// noise; it spends as much), 53.6 / 53.1; 64 pods R=8 0.999, 42.9 / 42.4;
// 1,024 pods R=32 1.040 (3 of 3 seeds higher; 0.960 of foreign_change 0's),
// 182.3 / 109.9 (cached's 50 ms: 601.5). 20 spent less (48.3, 41.5, 77.3)
// but bound live behind 8 replicas (41 scrapes per pod per s against 57,
// p50 TTFT 1.046x per seed over 12 seeds). Live replicas_r8 with 40, the
// same requests per seed: p99 1.032x, p50 1.021x per seed (12 seeds; the
// arm without a budget against itself across holds: 0.954x, 0.993x), 46
// scrapes per pod per s against 57: the credit starts empty and a 15 s run
// is mostly its start. The bound is per request: a pod serving more
// requests may be scraped more (bench/results/2026-12-02-s16/podcost).
const DefaultForeignBudget = 40.0

// Breaker configures the per-backend circuit breaker.
type Breaker struct {
	ConsecutiveFailures int      `yaml:"consecutive_failures"` // default 5
	OpenFor             Duration `yaml:"open_for"`             // default 5s
	HalfOpenRequests    int      `yaml:"half_open_requests"`   // default 1
}

// Log configures zerolog.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error; default info
	Format string `yaml:"format"` // json | console; default json
	Access bool   `yaml:"access"` // default true: one line per request
}
