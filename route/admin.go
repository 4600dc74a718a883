package route

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/probegate/probegate/internal/config"
)

// AdminHandler returns the admin listener's handler: /metrics (Prometheus),
// /healthz (the process is alive), /readyz (at least one eligible backend)
// /debug/backends (JSON state of every backend), /debug/config (JSON: the
// sampling settings in effect for the current pool) and /debug/pprof/ (Go's
// runtime profiles, for `go tool pprof`). It binds to loopback by default
// (server.admin_listen); expose it only on a trusted network.
func (p *Proxy) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !p.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("no eligible backend\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /debug/backends", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p.DebugBackends())
	})
	mux.HandleFunc("GET /debug/config", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p.DebugConfig())
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// Admin listener bounds. The admin endpoints answer from memory, so a
// peer slower than these is misbehaving; none is a config key.
const (
	// adminReadHeaderTimeout bounds reading a request's head.
	adminReadHeaderTimeout = 10 * time.Second
	// adminReadTimeout bounds reading a whole request, body included (the
	// endpoints take none; one left unread is drained before the next
	// request). net/http clears the read deadline once the request is
	// read, so a long answer is not cut by it.
	adminReadTimeout = 10 * time.Second
	// adminWriteTimeout bounds writing an answer, from the end of the
	// request's head: /debug/pprof/profile and /trace take seconds= under
	// it (Go's pprof refuses longer, saying so).
	adminWriteTimeout = 2 * time.Minute
	// adminIdleTimeout bounds the wait for the next request on a kept-alive
	// connection: above Prometheus's usual scrape intervals (up to 1m), so
	// scrapes keep their connection.
	adminIdleTimeout = 2 * time.Minute
	// adminMaxHeaderBytes bounds a request's head.
	adminMaxHeaderBytes = 64 << 10
)

// AdminServer returns the admin listener's server for h (AdminHandler),
// with every wait bounded. ReadHeaderTimeout alone left the rest unbounded:
// a connection kept alive after one request, a body trickled after the
// head, or an answer its peer never read each held a connection and a
// goroutine for as long as the peer liked, and the admin listener shares
// the process's file descriptors with the proxy's own (deploy/ binds it to
// the pod's address, for Prometheus).
func AdminServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: adminReadHeaderTimeout,
		ReadTimeout:       adminReadTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       adminIdleTimeout,
		MaxHeaderBytes:    adminMaxHeaderBytes,
	}
}

// ConfigInfo is /debug/config: the sampling settings the current pool
// snapshot runs with, beside what the configuration says ("auto" or the
// number), so that an operator sees what route.d auto chose.
type ConfigInfo struct {
	Policy   string `json:"route.policy"`
	Backends int    `json:"backends"` // the pool's size, which route.d auto follows
	// D and Quorum are the values in effect; Quorum is 0 for policies
	// that do not probe.
	D      int `json:"route.d"`
	Quorum int `json:"probe.quorum"`
	Hedges int `json:"probe.hedges"`
	// DConfigured and QuorumConfigured are the configured values: "auto"
	// or the number.
	DConfigured      string `json:"route.d_configured"`
	QuorumConfigured string `json:"probe.quorum_configured"`
	// EventLoop is server.event_loop as the proxy started with it (a
	// reload does not change how the listener is served).
	EventLoop bool `json:"server.event_loop"`
}

// DebugConfig returns the sampling settings in effect (/debug/config).
func (p *Proxy) DebugConfig() ConfigInfo {
	snap := p.snap.Load()
	set := snap.set
	configured := func(v, auto int) string {
		if v == auto {
			return "auto"
		}
		return strconv.Itoa(v)
	}
	return ConfigInfo{
		Policy:           set.pc.Policy,
		Backends:         snap.pool.Len(),
		D:                set.pc.D,
		Quorum:           set.quorum,
		Hedges:           set.pc.Hedges,
		DConfigured:      configured(set.cfg.Route.D, config.DAuto),
		QuorumConfigured: configured(set.cfg.Probe.Quorum, config.QuorumAuto),
		EventLoop:        p.servesLoops(),
	}
}

// BackendInfo is one backend's entry in /debug/backends.
type BackendInfo struct {
	Address        string      `json:"address"`
	Origin         string      `json:"origin"`
	Breaker        string      `json:"breaker"`
	Eligible       bool        `json:"eligible"`
	Draining       bool        `json:"draining"`
	Inflight       int         `json:"inflight"`
	Report         *ReportInfo `json:"report"`
	View           ViewInfo    `json:"view"`
	ScrapeInterval string      `json:"scrape_interval,omitempty"`
}

// ReportInfo is the newest load report of a backend.
type ReportInfo struct {
	Source       string   `json:"source"`
	AgeSeconds   float64  `json:"age_seconds"`
	Running      int      `json:"running"`
	Waiting      int      `json:"waiting"`
	KVCache      float64  `json:"kv_cache_usage"`
	ServerLoad   int      `json:"server_load"`
	MaxLoRA      int      `json:"max_lora"`
	RunningLoRAs []string `json:"running_lora_adapters"`
	WaitingLoRAs []string `json:"waiting_lora_adapters"`
}

// ViewInfo is what the router would judge the backend on now.
type ViewInfo struct {
	Source     string  `json:"source"`
	Queue      float64 `json:"queue"`
	Correction int     `json:"local_correction"`
}

// DebugBackends returns the state of every backend in the pool.
func (p *Proxy) DebugBackends() []BackendInfo {
	now := p.now()
	snap := p.snap.Load()
	pool := snap.pool
	out := make([]BackendInfo, 0, len(pool.backends))
	for _, b := range pool.backends {
		bi := BackendInfo{
			Address:  b.addr,
			Origin:   b.Origin(),
			Breaker:  b.brk.State().String(),
			Eligible: b.Eligible(),
			Draining: b.draining.Load(),
			Inflight: b.state.Inflight(),
		}
		if l := b.state.Latest(); l != nil {
			bi.Report = &ReportInfo{
				Source: l.Source.String(), AgeSeconds: now.Sub(l.At).Seconds(),
				Running: l.Running, Waiting: l.Waiting, KVCache: l.KVUse, ServerLoad: l.ServerLoad,
				MaxLoRA: l.MaxLoRA, RunningLoRAs: l.RunningLoRAs, WaitingLoRAs: l.WaitingLoRAs,
			}
		}
		v := b.state.View(now, snap.set.pc.StaleAfter)
		bi.View = ViewInfo{Source: v.Source.String(), Queue: v.Queue, Correction: v.Correction}
		if d := b.state.ScrapeInterval(); d > 0 {
			bi.ScrapeInterval = d.Round(time.Millisecond).String()
		}
		out = append(out, bi)
	}
	return out
}
