package rawconn

// ExchangeResult is what Socket.Exchange did with the request.
type ExchangeResult uint8

const (
	Exchanged ExchangeResult = iota // the request was written whole; n and err are the read's
	Unusable                        // the socket had stray bytes or was closed by its peer: nothing was written
	NotSent                         // writing failed (err): the request never left whole
)
