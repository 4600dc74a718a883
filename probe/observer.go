package probe

import "time"

// Outcomes passed to Observer.Probe and Observer.Scrape. They are the
// values of the outcome label of probegate_probes_total and
// probegate_scrapes_total.
const (
	OutcomeOK           = "ok"
	OutcomeTimeout      = "timeout"
	OutcomeError        = "error"
	OutcomeHedge        = "hedge"         // probes only: a hedge probe was sent
	OutcomeSkippedFresh = "skipped_fresh" // probes only: cached report fresh enough
	// OutcomeCoalesced: probes only: a request waited for a probe already in
	// flight to the same backend instead of sending its own.
	OutcomeCoalesced = "coalesced"
	// OutcomeCancelled: probes only: a probe sent that ended without an
	// answer after every request waiting for it had reached its quorum
	// (the loser of a quorum, cut short), not a timeout.
	OutcomeCancelled = "cancelled"
	// OutcomeSkippedSlow: probes only: a candidate whose last probe did
	// not answer within probe.deadline was not waited for (its cached
	// state was used; a probe nobody waits for was sent to it unless one
	// was in flight).
	OutcomeSkippedSlow = "skipped_slow"
	// OutcomeSkippedRecent: probes only: a candidate whose report was no
	// longer fresh but younger than twice probe.fresh_for was not waited
	// for (its cached state was used; a probe nobody waits for was sent to
	// it unless one was in flight).
	OutcomeSkippedRecent = "skipped_recent"
)

// Observer receives the prober's and the scraper's events; the composition
// root implements it with Prometheus metrics so this package need not import
// them. Implementations must be safe for concurrent use and cheap: Probe is
// called on the request path.
type Observer interface {
	// Probe is called once per probe sent, when it completes (ok, timeout,
	// error, cancelled; d is the round trip), once per hedge sent (hedge,
	// d = 0; the hedge probe later reports its own completion), once per
	// candidate skipped as fresh (skipped_fresh, d = 0) and once per
	// candidate whose probe already in flight was joined instead of sending
	// another (coalesced, d = 0), once per candidate not waited for
	// because its probes are slow (skipped_slow, d = 0) or because its
	// report was recent (skipped_recent, d = 0). Probes sent = ok +
	// timeout + error + cancelled.
	Probe(outcome string, d time.Duration)
	// Scrape is called once per scrape with ok, timeout or error.
	Scrape(addr, outcome string)
	// ScrapeInterval is called after each scrape with the interval until the
	// next one.
	ScrapeInterval(addr string, d time.Duration)
}

// NopObserver is an Observer that discards everything.
type NopObserver struct{}

var _ Observer = NopObserver{}

// Probe does nothing.
func (NopObserver) Probe(string, time.Duration) {}

// Scrape does nothing.
func (NopObserver) Scrape(string, string) {}

// ScrapeInterval does nothing.
func (NopObserver) ScrapeInterval(string, time.Duration) {}
