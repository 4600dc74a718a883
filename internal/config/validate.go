package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Problem is one thing wrong with a configuration, at the YAML path Path
// (e.g. "route.d", "backends.static[2]"; empty for the file as a whole).
type Problem struct {
	Path string
	Msg  string

	key bool // the problem is the key itself (unknown, duplicate): Msg names the path
}

// String formats p as "path: msg", or as the message alone when the problem
// is an unknown or duplicated key ("unknown key probe.dedline") or concerns
// the whole file.
func (p Problem) String() string {
	if p.key || p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Errors is every problem found in a configuration, in file order for
// decoding problems followed by validation problems in section order. Its
// Error is one problem per line. Callers get at the list with errors.As.
type Errors []Problem

// Error joins the problems, one per line.
func (e Errors) Error() string {
	var b strings.Builder
	for i, p := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// vLLMKeepAlive is how long vLLM (uvicorn) keeps an idle connection open.
const vLLMKeepAlive = 5 * time.Second

// Validate checks c and returns nil or an Errors listing every problem at
// once, each named by its YAML path. A Config that passes is safe to hand to
// every package: they need not re-check their sections.
func (c *Config) Validate() error {
	if p := validate(c); len(p) > 0 {
		return p
	}
	return nil
}

type checker struct{ probs Errors }

// goos is the platform server.event_loop is judged on (a variable for the
// test of the refusal elsewhere than Linux).
var goos = runtime.GOOS

func (v *checker) add(path, format string, args ...any) {
	v.probs = append(v.probs, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *checker) positive(path string, d Duration) {
	if d <= 0 {
		v.add(path, "must be > 0")
	}
}

func (v *checker) nonNegative(path string, d Duration) {
	if d < 0 {
		v.add(path, "must be >= 0")
	}
}

func (v *checker) atLeast(path string, n int64, lo int64) {
	if n < lo {
		v.add(path, "must be >= %d", lo)
	}
}

func (v *checker) atMost(path string, n int64, hi int64) {
	if n > hi {
		v.add(path, "must be <= %d", hi)
	}
}

func (v *checker) oneOf(path, s string, allowed ...string) {
	if slices.Contains(allowed, s) {
		return
	}
	switch len(allowed) {
	case 2:
		v.add(path, "must be %s or %s, got %q", allowed[0], allowed[1], s)
	default:
		v.add(path, "must be one of %s, got %q", strings.Join(allowed, ", "), s)
	}
}

func (v *checker) weight(path string, w float64) {
	if !(w >= 0) || math.IsInf(w, 0) {
		v.add(path, "must be a finite number >= 0")
	}
}

// hostPort checks a listen or dial address "host:port"; the host may be
// empty (all interfaces) only if emptyHost.
func (v *checker) hostPort(path, addr string, emptyHost bool, minPort int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(path, "must be host:port, got %q", addr)
		return
	}
	if host == "" && !emptyHost {
		v.add(path, "must be host:port with a host, got %q", addr)
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < minPort || n > 65535 {
		v.add(path, "port must be a number in %d..65535, got %q", minPort, port)
	}
}

func validate(c *Config) Errors {
	v := &checker{}

	s := c.Server
	v.hostPort("server.listen", s.Listen, true, 0)
	v.hostPort("server.admin_listen", s.AdminListen, true, 0)
	v.overlapping(s.listeners())
	v.atLeast("server.max_body_bytes", s.MaxBodyBytes, 1)
	v.atLeast("server.max_header_bytes", int64(s.MaxHeaderBytes), 1)
	if s.EventLoop && goos != "linux" {
		v.add("server.event_loop", "event loops are supported on Linux only (this is %s): set it to false", goos)
	}
	v.positive("server.read_timeout", s.ReadTimeout)
	v.nonNegative("server.shutdown_grace", s.ShutdownGrace)

	b := c.Backends
	sources := 0
	for _, set := range []bool{len(b.Static) > 0, b.DNS != "", b.Kubernetes.Enabled()} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		v.add("backends", "set static, dns or kubernetes")
	case sources > 1:
		v.add("backends", "set only one of static, dns and kubernetes")
	}
	seen := make(map[string]int, len(b.Static))
	for i, raw := range b.Static {
		path := fmt.Sprintf("backends.static[%d]", i)
		norm, msg := checkBackendURL(raw)
		if msg != "" {
			v.add(path, "%s", msg)
			continue
		}
		if j, dup := seen[norm]; dup {
			v.add(path, "duplicate of backends.static[%d]", j)
			continue
		}
		seen[norm] = i
	}
	if b.DNS != "" {
		v.hostPort("backends.dns", b.DNS, false, 1)
	}
	v.positive("backends.dns_refresh", b.DNSRefresh)
	v.oneOf("backends.scheme", b.Scheme, SchemeHTTP, SchemeHTTPS)
	if b.Scheme == SchemeHTTPS && len(b.Static) > 0 {
		v.add("backends.scheme", "applies to backends found by dns or kubernetes; static URLs carry their own (write https://host:port)")
	}
	if b.Kubernetes.Enabled() {
		v.kubernetes(b.Kubernetes)
	}

	u := c.Upstream
	v.positive("upstream.connect_timeout", u.ConnectTimeout)
	v.positive("upstream.first_byte_timeout", u.FirstByteTimeout)
	v.positive("upstream.idle_timeout", u.IdleTimeout)
	v.atLeast("upstream.max_conns_per_backend", int64(u.MaxConnsPerBackend), 1)
	switch {
	case u.IdleConnTTL <= 0:
		v.add("upstream.idle_conn_ttl", "must be > 0")
	case u.IdleConnTTL.D() >= vLLMKeepAlive:
		v.add("upstream.idle_conn_ttl", "should be < 5s (vLLM closes idle connections at 5s)")
	}
	v.atLeast("upstream.retries", int64(u.Retries), 0)
	v.atMost("upstream.retries", int64(u.Retries), MaxRetries)
	v.upstreamTLS(u.TLS)

	r := c.Route
	if len(r.AllowPaths) == 0 {
		v.add("route.allow_paths", `must not be empty (["/*"] forwards every path)`)
	}
	for i, e := range r.AllowPaths {
		if _, err := ParseAllowRule(e); err != nil {
			v.add(fmt.Sprintf("route.allow_paths[%d]", i), "%s", err.Error())
		}
	}
	v.oneOf("route.policy", r.Policy, policies...)
	if r.D < DAuto || r.D > MaxD {
		v.add("route.d", "must be auto (0) or 1..%d, got %d", MaxD, r.D)
	}
	v.weight("route.weights.queue", r.Weights.Queue)
	v.weight("route.weights.kv_cache", r.Weights.KVCache)
	v.weight("route.weights.prefix", r.Weights.Prefix)
	v.weight("route.weights.lora", r.Weights.LoRA)
	v.atLeast("route.saturation.max_waiting", int64(r.Saturation.MaxWaiting), 1)
	if kv := r.Saturation.MaxKVCache; !(kv > 0 && kv <= 1) {
		v.add("route.saturation.max_kv_cache", "must be in (0, 1]")
	}
	v.atLeast("route.affinity_max_queue_gap", int64(r.AffinityMaxQueueGap), 0)
	v.load(r.Load)
	v.atLeast("route.prefix.block_chars", int64(r.Prefix.BlockChars), 1)
	v.atLeast("route.prefix.max_blocks", int64(r.Prefix.MaxBlocks), 1)
	v.atLeast("route.prefix.entries_per_backend", int64(r.Prefix.EntriesPerBackend), 1)
	v.atLeast("route.prefix.index_entries", int64(r.Prefix.IndexEntries), 1)
	v.atMost("route.prefix.index_entries", int64(r.Prefix.IndexEntries), MaxIndexEntries)

	p := c.Probe
	v.oneOf("probe.endpoint", p.Endpoint, EndpointMetrics, EndpointLoad)
	v.positive("probe.deadline", p.Deadline)
	switch d, auto, err := p.HedgeDelay(); {
	case err != nil:
		v.add("probe.hedge_after", "%v", err)
	case !auto && p.Deadline > 0 && d >= p.Deadline.D():
		v.add("probe.hedge_after", "must be < probe.deadline")
	}
	v.atLeast("probe.hedges", int64(p.Hedges), 0)
	v.atMost("probe.hedges", int64(p.Hedges), MaxD)
	if p.Quorum < QuorumAuto {
		v.add("probe.quorum", "must be auto or >= 0 (0: d-1), got %d", p.Quorum)
	}
	// A quorum above route.d + probe.hedges is not an error: it means
	// "wait for every probe" (still bounded by probe.deadline), so a user
	// who lowers route.d is not tripped by the default quorum.
	v.nonNegative("probe.fresh_for", p.FreshFor)

	sc := c.Scrape
	v.positive("scrape.interval", sc.Interval)
	v.positive("scrape.min_interval", sc.MinInterval)
	v.positive("scrape.max_interval", sc.MaxInterval)
	if sc.MinInterval <= 0 || sc.MaxInterval <= 0 {
		// Already reported.
	} else if sc.MinInterval > sc.MaxInterval {
		v.add("scrape.min_interval", "must be <= scrape.max_interval")
	} else if sc.Adaptive && sc.Interval > 0 && (sc.Interval < sc.MinInterval || sc.Interval > sc.MaxInterval) {
		v.add("scrape.interval", "must be within [scrape.min_interval, scrape.max_interval] when scrape.adaptive is true")
	}
	v.positive("scrape.timeout", sc.Timeout)
	v.positive("scrape.stale_after", sc.StaleAfter)
	v.weight("scrape.foreign_change", sc.ForeignChange)
	v.weight("scrape.foreign_budget", sc.ForeignBudget)

	br := c.Breaker
	v.atLeast("breaker.consecutive_failures", int64(br.ConsecutiveFailures), 1)
	v.positive("breaker.open_for", br.OpenFor)
	v.atLeast("breaker.half_open_requests", int64(br.HalfOpenRequests), 1)

	l := c.Log
	v.oneOf("log.level", l.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", l.Format, "json", "console")

	return v.probs
}

// BackendAddr returns the host:port a backend URL names and whether it
// uses TLS. raw is a backends.static value that passed Validate
// ("http(s)://host:port", optional trailing "/") or a bare "host:port" as
// DNS and Kubernetes discovery produce. It and Validate share one parser
// (parseBackendURL); a value Validate would refuse yields ok false.
func BackendAddr(raw string) (addr string, tls, ok bool) {
	if !strings.Contains(raw, "://") {
		return raw, false, raw != ""
	}
	u, msg := parseBackendURL(raw)
	if msg != "" {
		return "", false, false
	}
	return u.Host, u.Scheme == "https", true
}

// TargetAddr is BackendAddr for a backend of this pool: a bare host:port
// (found by DNS or Kubernetes) uses TLS when backends.scheme is https.
func (b Backends) TargetAddr(raw string) (addr string, tls, ok bool) {
	addr, tls, ok = BackendAddr(raw)
	if ok && !strings.Contains(raw, "://") {
		tls = b.Scheme == SchemeHTTPS
	}
	return addr, tls, ok
}

// checkBackendURL checks that raw is http(s)://host:port with an optional
// trailing "/" and returns a normalized form for duplicate detection, or a
// problem message.
func checkBackendURL(raw string) (norm, msg string) {
	u, msg := parseBackendURL(raw)
	if msg != "" {
		return "", msg
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), ""
}

// parseBackendURL parses raw as http(s)://host:port with an optional
// trailing "/", or returns a problem message.
func parseBackendURL(raw string) (*url.URL, string) {
	const want = "must be http(s)://host:port"
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Sprintf("%s, got %q (%v)", want, raw, unwrapURLError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Sprintf("%s, got %q: scheme must be http or https", want, raw)
	case u.Opaque != "" || u.Host == "":
		return nil, fmt.Sprintf("%s, got %q: no host", want, raw)
	case u.User != nil:
		return nil, fmt.Sprintf("%s, got %q: user info is not allowed", want, raw)
	case u.Hostname() == "":
		return nil, fmt.Sprintf("%s, got %q: no host", want, raw)
	case u.Port() == "":
		return nil, fmt.Sprintf("%s, got %q: the port is required", want, raw)
	case u.Path != "" && u.Path != "/":
		return nil, fmt.Sprintf("%s, got %q: no path is allowed (the request's path is forwarded as is)", want, raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Sprintf("%s, got %q: no query or fragment is allowed", want, raw)
	}
	if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Sprintf("%s, got %q: port must be in 1..65535", want, raw)
	}
	return u, ""
}

func unwrapURLError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
