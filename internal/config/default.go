package config

import "time"

// Default returns a new Config holding every documented default (see the
// field comments and config.yaml). Backends are left empty, so Default()
// alone does not validate: a deployment must name its backends.
func Default() *Config {
	return &Config{
		Server: Server{
			Listen:         ":8080",
			AdminListen:    "127.0.0.1:9090",
			MaxBodyBytes:   16 << 20,
			MaxHeaderBytes: 64 << 10,
			ReadTimeout:    Duration(30 * time.Second),
			ShutdownGrace:  Duration(30 * time.Second),
			EventLoop:      false, // the fasthttp server; see Server.EventLoop
		},
		Backends: Backends{
			DNSRefresh: Duration(5 * time.Second),
			Scheme:     SchemeHTTP,
		},
		Upstream: Upstream{
			ConnectTimeout:     Duration(2 * time.Second),
			FirstByteTimeout:   Duration(60 * time.Second),
			IdleTimeout:        Duration(60 * time.Second),
			MaxConnsPerBackend: 1024,
			IdleConnTTL:        Duration(4 * time.Second),
			Retries:            1,
			RetryOnReset:       true,
		},
		Route: Route{
			AllowPaths: append([]string(nil), DefaultAllowPaths...),
			Policy:     PolicyProbe,
			D:          DAuto,
			Weights: Weights{
				Queue:   2,
				KVCache: 2,
				Prefix:  3,
				LoRA:    1,
			},
			Saturation: Saturation{
				MaxWaiting: 64,
				MaxKVCache: 0.95,
				Shed:       false,
			},
			AffinityMaxQueueGap: 2,
			Load:                defaultLoad(),
			Prefix: Prefix{
				BlockChars:        256,
				MaxBlocks:         64,
				EntriesPerBackend: 16384,
				IndexEntries:      1 << 17,
			},
		},
		Probe: Probe{
			Endpoint:   EndpointMetrics,
			Deadline:   Duration(5 * time.Millisecond),
			HedgeAfter: HedgeAuto,
			Hedges:     1,
			Quorum:     QuorumAuto,
			FreshFor:   Duration(2 * time.Millisecond),
			ORCA:       true,
		},
		Scrape: Scrape{
			Interval:    Duration(time.Second),
			Adaptive:    true,
			MinInterval: Duration(50 * time.Millisecond),
			MaxInterval: Duration(time.Second),
			Timeout:     Duration(time.Second),
			StaleAfter:  Duration(2 * time.Second),

			ForeignChange: 0.1,
			ForeignBudget: DefaultForeignBudget,
		},
		Breaker: Breaker{
			ConsecutiveFailures: 5,
			OpenFor:             Duration(5 * time.Second),
			HalfOpenRequests:    1,
		},
		Log: Log{
			Level:  "info",
			Format: "json",
			Access: true,
		},
	}
}
