package route

import (
	"time"

	"github.com/probegate/probegate/internal/config"
)

// settings is the reloadable part of the configuration, converted once per
// reload into the values the request path needs. Immutable once published.
type settings struct {
	cfg     *config.Config
	pc      PickerConfig
	prober  Prober // the probe policy's; nil for the others
	quorum  int    // the prober's probe.quorum, resolved for the pool (Proxy.sized)
	reports bool   // the policy reads reports: scrape the pool
	orca    bool   // ask backends for ORCA load headers
	allow   *allowList
	retries int
	// retryOnReset: re-pick after a connection closed before the first
	// response byte (upstream.retry_on_reset).
	retryOnReset bool
	blockChars   int
	maxBlocks    int
	maxBody      int64
	idle         time.Duration
	firstByte    time.Duration // upstream.first_byte_timeout
	accessLog    bool
	// defaultOutput is route.load.default_output_tokens.
	defaultOutput float64
	// tls is upstream.tls with its files read, as buildSettings read them;
	// New and Reload make it the proxy's (Proxy.applyTLS).
	tls config.ClientTLS
}

// snapshot is what the request path loads, once per request, with one
// atomic load: the settings, the pool and the Picker built over both. The
// control plane publishes a new snapshot whenever either changes.
type snapshot struct {
	set    *settings
	pool   *Pool
	picker Picker
}
