package probe

import (
	"fmt"
	"math"
	"time"

	"github.com/valyala/fastjson"
)

// MaxLoadBytes is the largest /load body ParseLoadJSON accepts. The real
// body is about 20 bytes.
const MaxLoadBytes = 64 << 10

// jsonParsers pools fastjson parsers for ParseLoadJSON and ParseORCA.
var jsonParsers fastjson.ParserPool

// ParseLoadJSON extracts a Load from the body of vLLM's GET /load endpoint,
// {"server_load": N}: N (a finite number >= 0, rounded to an int) becomes
// ServerLoad; every other field of the Load is unknown. Unknown JSON fields
// are ignored. A missing, negative or non-numeric server_load, malformed JSON
// or a body over MaxLoadBytes is an error wrapping ErrSyntax, ErrNoLoad or
// ErrTooLarge.
//
// The returned Load has At = now and Source = SourceNone. ParseLoadJSON is
// safe for concurrent use and does not allocate in the steady state.
func ParseLoadJSON(body []byte, now time.Time) (Load, error) {
	l := Unknown(now, SourceNone)
	if len(body) > MaxLoadBytes {
		return l, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(body), MaxLoadBytes)
	}
	p := jsonParsers.Get()
	defer jsonParsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return l, fmt.Errorf("%w: /load: %v", ErrSyntax, err)
	}
	sl := v.Get("server_load")
	if sl == nil {
		return l, fmt.Errorf("%w: /load: no server_load", ErrNoLoad)
	}
	f, err := sl.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > maxCount {
		return l, fmt.Errorf("%w: /load: bad server_load %s", ErrSyntax, sl.String())
	}
	l.ServerLoad = int(math.Round(f))
	return l, nil
}
