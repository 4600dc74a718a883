package route

// excuseReason is why an upstream failure was not counted against its
// backend's breaker: the label of probegate_breaker_excused_total.
type excuseReason uint8

const (
	// excuseProgress: a non-stream first-byte timeout, or a stream's
	// silence after its head (failAfterHead, bodyStream.finish), while
	// the backend's token counters advanced (silenceOutcome; the progress
	// watch provides the reports under every policy): "progress".
	excuseProgress excuseReason = iota
	// excuseHealthy: a 5xx answer from a backend that answers the
	// proxy's canary (judgeServerError): "healthy".
	excuseHealthy
	// excuseAlsoFailed: a 5xx answer re-sent to another backend that
	// answered 5xx too (second_opinion.go): "also_failed".
	excuseAlsoFailed
	// excuseOverloaded: a 503 answer with Retry-After, the backend's own
	// word that it is overloaded, not broken (overload.go): "overloaded".
	excuseOverloaded
)
