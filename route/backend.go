package route

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/probe"
)

// Backend is one model server. It is long-lived: pool rebuilds (reloads,
// DNS changes) reuse the Backend of an address that stays, so its counters,
// breaker, load state and affinity tables survive. All fields are either
// immutable after construction or safe for concurrent use.
type Backend struct {
	// Immutable after construction.
	addr  string // host:port, also the metric label
	url   string // base URL as configured
	https bool   // spoken to over TLS
	// loopAddr is addr as an IP address and port for plain-HTTP backends
	// named by one, the only ones server.event_loop's loops speak to;
	// the zero value otherwise (membership.go).
	loopAddr netip.AddrPort
	state    *probe.State
	brk      *breaker.Breaker
	hc       *fasthttp.HostClient
	conns    *connTable // hc's open connections
	prefix   *prefixTable

	// Lock-free.
	codeCounters   sync.Map // int status -> prometheus.Counter of requests_total
	resentCounters sync.Map // int status -> prometheus.Counter of resent_server_errors_total
	lora           loraMemory
	draining       atomic.Bool            // removed from the pool; finishing in-flight requests
	closed         atomic.Bool            // its HostClient's idle connections were closed
	origin         atomic.Pointer[string] // the discovery source that named it
	canary         canary                 // judges its 5xx answers (canary.go)
}

// Origin returns where the backend was found: "static", "dns:NAME" or a
// Kubernetes object ("kubernetes:endpointslice/NS/NAME",
// "kubernetes:pod/NS/NAME").
func (b *Backend) Origin() string {
	if o := b.origin.Load(); o != nil {
		return *o
	}
	return ""
}

func (b *Backend) setOrigin(o string) {
	if cur := b.origin.Load(); cur == nil || *cur != o {
		b.origin.Store(&o)
	}
}

// Addr returns the backend's host:port.
func (b *Backend) Addr() string { return b.addr }

// State returns the backend's load state.
func (b *Backend) State() *probe.State { return b.state }

// NewBackend returns a Backend for addr ("host:port") with a fresh
// probe.State, an empty prefix table of prefixEntries block hashes, no
// upstream client and no breaker (so it is always Eligible): what a
// simulator needs to drive pickers without sockets. The simulator calls
// State().Dispatch and Finish around each simulated request,
// Memory.NoteDispatch when it sends one, and State().Report with the loads
// it makes up.
// The proxy builds its own backends, with a client and a breaker.
func NewBackend(addr string, prefixEntries int) *Backend {
	return &Backend{addr: addr, state: probe.NewState(addr), prefix: newPrefixTable(prefixEntries)}
}

// Eligible reports whether the backend may be sampled: not draining and its
// breaker not open. Lock-free.
func (b *Backend) Eligible() bool {
	return !b.draining.Load() && (b.brk == nil || b.brk.Available())
}
