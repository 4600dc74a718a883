// Command probegate is an L7 reverse proxy for fleets of vLLM model servers.
// For each request it samples d servers, asks them for their load with
// hedged, deadline-bounded probes, falls back to cached state when the
// deadline passes, and streams the request to the winner.
//
//	probegate -config config.yaml          run the proxy
//	probegate -config config.yaml -check   validate the file: exit 0, or 2 listing each problem
//	probegate -demo                        4 simulated vLLM servers and the proxy in front of them
//
// SIGTERM or SIGINT drain in-flight streams for up to server.shutdown_grace;
// SIGHUP reloads the configuration (an invalid file is logged and ignored).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/kube"
	"github.com/probegate/probegate/internal/logsink"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/route"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig, nil))
}

// run is the whole program, parameterised for tests: it returns the exit
// code; signals arrive on sig; ready, when non-nil, receives the proxy and
// admin addresses once both listen.
func run(args []string, stdout, stderr io.Writer, sig <-chan os.Signal, ready chan<- [2]string) int {
	fs := flag.NewFlagSet("probegate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "path of the configuration file")
	check := fs.Bool("check", false, "validate the configuration and exit: 0 if valid, 2 listing each problem")
	demo := fs.Bool("demo", false, "start 4 simulated vLLM servers on loopback and the proxy in front of them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "probegate: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfgGiven := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" {
			cfgGiven = true
		}
	})

	var cfg *config.Config
	var err error
	if *demo && !cfgGiven {
		cfg = config.Default()
	} else {
		cfg, err = config.Load(*cfgPath)
	}
	if err != nil {
		fmt.Fprintf(stderr, "probegate: %s is invalid:\n%s\n", *cfgPath, indent(err.Error()))
		return 2
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
		return 0
	}

	var fleet *vllmsim.Fleet
	if *demo {
		// The demo pods write lowercase header names, as uvicorn (which
		// serves vLLM) does, so the demo exercises what production sees.
		sim := vllmsim.DefaultConfig()
		sim.LowercaseHeaders = true
		fleet, err = vllmsim.StartFleet(4, "127.0.0.1", 0, sim)
		if err != nil {
			fmt.Fprintf(stderr, "probegate: demo: starting simulated servers: %v\n", err)
			return 1
		}
		defer fleet.Close()
		cfg.Backends.Static = fleet.URLs()
		cfg.Backends.DNS = ""
		cfg.Backends.Kubernetes = config.Kubernetes{}
	}

	// Log lines (one per request with log.access) never wait for stderr:
	// a slow destination drops lines, counted, instead of stalling requests.
	var log zerolog.Logger
	sink := logsink.New(stderr, func(total uint64) {
		log.Warn().Uint64("dropped_total", total).Msg("log lines dropped: stderr is slower than the proxy writes (see probegate_log_dropped_total)")
	})
	defer sink.Close()
	log = newLogger(cfg.Log, sink)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "probegate_log_dropped_total",
			Help: "Log lines dropped because stderr did not take them as fast as they were written.",
		}, func() float64 { return float64(sink.Dropped()) }))
	p, err := route.New(route.Options{Config: cfg, Logger: log, Registerer: reg, Discover: kube.Start})
	if err != nil {
		fmt.Fprintf(stderr, "probegate: %v\n", err)
		return 1
	}
	var ln net.Listener
	var addr net.Addr
	if cfg.Server.EventLoop {
		// One loop per P the process had, and one P more, so that nothing
		// else waits for a loop (internal/evloop's measured rule).
		loops := runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(loops + 1)
		addr, err = p.ServeLoops(cfg.Server.Listen, loops)
	} else {
		ln, err = route.Listen(cfg.Server.Listen)
		if err == nil {
			addr = ln.Addr()
		}
	}
	if err != nil {
		p.Close()
		fmt.Fprintf(stderr, "probegate: server.listen: %v\n", err)
		return 1
	}
	aln, err := net.Listen("tcp", cfg.Server.AdminListen)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		p.Close()
		fmt.Fprintf(stderr, "probegate: server.admin_listen: %v\n", err)
		return 1
	}
	admin := route.AdminServer(p.AdminHandler())
	serveErr := make(chan error, 2)
	if ln != nil {
		go func() { serveErr <- p.Serve(ln) }()
	}
	go func() {
		if err := admin.Serve(aln); !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	log.Info().Str("listen", addr.String()).Str("admin", aln.Addr().String()).
		Str("policy", cfg.Route.Policy).Int("backends", p.Pool().Len()).Bool("event_loop", cfg.Server.EventLoop).
		Int("gomaxprocs", runtime.GOMAXPROCS(0)).Msg("probegate serving")
	if cfg.Server.EventLoop {
		log.Warn().Msg("server.event_loop is experimental: the loop path does not yet keep every guarantee of the usual server (see its doc in config.yaml); keep it false in production")
	}
	if *demo {
		fmt.Fprintf(stdout, "probegate demo: 4 simulated vLLM servers (%s) behind %s\n", strings.Join(fleet.URLs(), ", "), addr)
		fmt.Fprintf(stdout, "try:\n  curl -N http://%s/v1/chat/completions -H 'Content-Type: application/json' \\\n    -d '{\"model\":\"%s\",\"stream\":true,\"max_tokens\":32,\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n", hostPort(addr), vllmsim.DefaultConfig().Model)
		fmt.Fprintf(stdout, "  curl http://%s/debug/backends\n  curl http://%s/metrics | grep probegate_\n", aln.Addr(), aln.Addr())
	}
	if ready != nil {
		ready <- [2]string{addr.String(), aln.Addr().String()}
	}

	code := 0
loop:
	for {
		select {
		case err := <-serveErr:
			log.Error().Err(err).Msg("listener failed")
			code = 1
			break loop
		case s := <-sig:
			if s == syscall.SIGHUP {
				reload(p, *cfgPath, *demo, fleet, log)
				continue
			}
			log.Info().Str("signal", s.String()).Dur("grace", cfg.Server.ShutdownGrace.D()).Msg("shutting down: draining in-flight requests")
			break loop
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace.D())
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("shutdown grace elapsed: remaining streams were cut")
	}
	actx, acancel := context.WithTimeout(context.Background(), adminShutdownWait)
	defer acancel()
	_ = admin.Shutdown(actx)
	log.Info().Msg("stopped")
	return code
}

// adminShutdownWait bounds the admin listener's shutdown, after the proxy
// drained (route.AdminServer bounds the rest).
const adminShutdownWait = time.Second

// reload re-reads the configuration on SIGHUP. An invalid file is logged
// problem by problem, and the running configuration keeps serving.
func reload(p *route.Proxy, path string, demo bool, fleet *vllmsim.Fleet, log zerolog.Logger) {
	cfg, err := config.Load(path)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			for _, pr := range errs {
				log.Error().Str("key", pr.Path).Str("problem", pr.Msg).Msg("config reload rejected")
			}
		} else {
			log.Error().Err(err).Msg("config reload rejected")
		}
		log.Warn().Str("config", path).Msg("keeping the running configuration")
		return
	}
	if fleet != nil {
		cfg.Backends.Static = fleet.URLs()
		cfg.Backends.DNS = ""
		cfg.Backends.Kubernetes = config.Kubernetes{}
	}
	if err := p.Reload(cfg); err != nil {
		log.Error().Err(err).Msg("config reload rejected; keeping the running configuration")
		return
	}
	log.Info().Str("config", path).Str("policy", cfg.Route.Policy).Msg("configuration reloaded")
}

// newLogger builds the zerolog logger of log.level and log.format.
func newLogger(c config.Log, w io.Writer) zerolog.Logger {
	if c.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	lvl, err := zerolog.ParseLevel(c.Level)
	if err != nil || c.Level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func hostPort(a net.Addr) string {
	s := a.String()
	if strings.HasPrefix(s, "[::]:") {
		return "127.0.0.1:" + s[len("[::]:"):]
	}
	if strings.HasPrefix(s, "0.0.0.0:") {
		return "127.0.0.1:" + s[len("0.0.0.0:"):]
	}
	return s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
