package evloop

import (
	"bytes"
	"net/netip"
)

// span is a range of a connection's input buffer. Parsed fields are kept
// as offsets, not slices, so they survive the buffer growing while a body
// is read.
type span struct{ off, end int32 }

func (s span) of(b []byte) []byte { return b[s.off:s.end] }

type field struct{ name, value span }

// Request is a parsed request head and its body, as Handler.Route and
// Handler.Done see it. Its byte slices point into the loop's buffer: valid
// only during the call, never to be retained or modified.
type Request struct {
	buf     []byte
	method  span
	target  span
	headers []field
	conn    span // the Connection header's value (tokens name hop-by-hop headers)
	head    int  // bytes of the head, through the blank line
	total   int  // head and body
	close   bool // Connection: close
	ticket  Ticket
	tag     any
	// Remote is the client's address.
	Remote netip.AddrPort
}

// Ticket returns the ticket Server.Resume takes to resume this request
// if the decision being made parks it (Decision.Park). Each Handler call
// that may park (Route, Resumed, Done with a retry, Head) has a ticket of
// its own.
func (r *Request) Ticket() Ticket { return r.ticket }

// Tag returns the Tag of the request's latest decision (nil in Route):
// in Resumed, that of the decision that parked it.
func (r *Request) Tag() any { return r.tag }

// Method returns the request method.
func (r *Request) Method() []byte { return r.method.of(r.buf) }

// Target returns the request target as sent (origin-form: path and query).
func (r *Request) Target() []byte { return r.target.of(r.buf) }

// Body returns the request body (Content-Length bytes).
func (r *Request) Body() []byte { return r.buf[r.head:r.total] }

// NumHeaders returns the number of header fields in the head.
func (r *Request) NumHeaders() int { return len(r.headers) }

// HeaderAt returns the i-th header field's name (as sent) and value
// (without surrounding white space).
func (r *Request) HeaderAt(i int) (name, value []byte) {
	f := r.headers[i]
	return f.name.of(r.buf), f.value.of(r.buf)
}

// Header returns the value of the first header field named name
// (case-insensitive), or nil.
func (r *Request) Header(name string) []byte {
	for _, f := range r.headers {
		if fold(f.name.of(r.buf), name) {
			return f.value.of(r.buf)
		}
	}
	return nil
}

// Outcomes of parsing a request head.
const (
	parseMore     = iota // no complete head yet
	parseOK              // complete and served by the loop
	parseHandOver        // well-formed, but for the fallback
	parseRefuse          // refused with the status parseRequest returns
)

type limits struct {
	head, headers, body int
}

// parseRequest parses the request head at the start of b into r. It
// returns the outcome and, for parseRefuse, the status: 400 malformed
// (including every ambiguity in framing a smuggler relies on), 431 head or
// header count over the limit, 413 body over the limit, 505 an HTTP
// version other than 1.x. A request the loop does not serve itself
// (chunked or Expect bodies, Upgrade, HTTP/1.0, HEAD, CONNECT, OPTIONS *,
// absolute-form targets, two Connection fields) is parseHandOver.
func parseRequest(b []byte, lim *limits, r *Request) (outcome, status int) {
	end := bytes.Index(b, crlfcrlf)
	if end < 0 {
		if len(b) > lim.head {
			return parseRefuse, 431
		}
		if i := bytes.IndexByte(b, '\n'); i == 0 || (i > 0 && b[i-1] != '\r') {
			return parseRefuse, 400 // a bare LF: never framed the way a peer might
		}
		return parseMore, 0
	}
	if end+4 > lim.head {
		return parseRefuse, 431
	}
	r.buf, r.headers, r.conn, r.close = b, r.headers[:0], span{}, false
	r.head = end + 4
	// Request line: method SP target SP HTTP/1.x CRLF.
	line := b[:bytes.IndexByte(b, '\n')+1]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) {
		return parseRefuse, 400
	}
	r.method = span{0, int32(sp)}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return parseRefuse, 400
	}
	r.target = span{int32(sp + 1), int32(sp + 1 + sp2)}
	for _, c := range rest[:sp2] {
		if c <= ' ' || c == 0x7f {
			return parseRefuse, 400
		}
	}
	ver := rest[sp2+1:]
	if len(ver) < 2 || ver[len(ver)-2] != '\r' {
		return parseRefuse, 400
	}
	ver = ver[:len(ver)-2]
	minor10 := false
	switch {
	case string(ver) == "HTTP/1.1":
	case string(ver) == "HTTP/1.0":
		minor10 = true
	case len(ver) == 8 && string(ver[:5]) == "HTTP/" && ver[5] >= '0' && ver[5] <= '9' && ver[6] == '.' && ver[7] >= '0' && ver[7] <= '9':
		return parseRefuse, 505
	default:
		return parseRefuse, 400
	}
	// Header fields.
	clen, sawLength, chunked, expect, upgrade, hosts, conns := 0, false, false, false, false, 0, 0
	i := len(line)
	for i < end+2 {
		j := bytes.IndexByte(b[i:end+2], '\n')
		if j < 1 || b[i+j-1] != '\r' {
			return parseRefuse, 400 // bare LF
		}
		ln := b[i : i+j-1]
		start := i
		i += j + 1
		c := bytes.IndexByte(ln, ':')
		if c <= 0 || !isToken(ln[:c]) {
			return parseRefuse, 400 // no name, white space before ':', obs-fold
		}
		v0, v1 := c+1, len(ln)
		for v0 < v1 && (ln[v0] == ' ' || ln[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (ln[v1-1] == ' ' || ln[v1-1] == '\t') {
			v1--
		}
		for _, ch := range ln[v0:v1] {
			if (ch < ' ' && ch != '\t') || ch == 0x7f {
				return parseRefuse, 400
			}
		}
		if len(r.headers) == lim.headers {
			return parseRefuse, 431
		}
		f := field{span{int32(start), int32(start + c)}, span{int32(start + v0), int32(start + v1)}}
		r.headers = append(r.headers, f)
		name, val := ln[:c], ln[v0:v1]
		switch len(name) {
		case 4:
			if fold(name, "host") {
				hosts++
			}
		case 6:
			if fold(name, "expect") {
				expect = true
			}
		case 7:
			if fold(name, "upgrade") {
				upgrade = true
			}
		case 10:
			if fold(name, "connection") {
				conns++
				if conns == 1 {
					r.conn = f.value
				}
				r.close = r.close || hasToken(val, "close")
				if hasToken(val, "upgrade") {
					upgrade = true
				}
			}
		case 14:
			if fold(name, "content-length") {
				n, ok := atoi(val)
				if !ok || (sawLength && n != clen) {
					return parseRefuse, 400
				}
				clen, sawLength = n, true
			}
		case 17:
			if fold(name, "transfer-encoding") {
				chunked = true
			}
		}
	}
	switch {
	case chunked && sawLength:
		return parseRefuse, 400 // both framings: the classic smuggling shape
	case hosts != 1 && !minor10:
		return parseRefuse, 400
	case clen > lim.body:
		return parseRefuse, 413
	}
	r.total = r.head + clen
	m := r.Method()
	// Two Connection fields are served by the fallback, which folds
	// them (the loop keeps one span of hop-by-hop names).
	if chunked || expect || upgrade || minor10 || conns > 1 || b[r.target.off] != '/' ||
		string(m) == "HEAD" || string(m) == "CONNECT" {
		return parseHandOver, 0
	}
	return parseOK, 0
}

// respHead is what the relay needs from an upstream response head.
type respHead struct {
	status int
	size   int // bytes of the head
	length int // Content-Length
	close  bool
}

// parseResponse parses the response head at the start of b. It returns
// parseMore without a complete head, parseOK for a response the loop
// relays (a final status with a Content-Length, or 204/304), and
// parseRefuse for anything else (malformed, over maxHead, a status
// outside 200-599, a line not ended by CRLF, a field name that is not a
// token, a control byte in a value, 1xx/101, chunked or close-delimited
// bodies).
func parseResponse(b []byte, maxHead int, h *respHead) int {
	end := bytes.Index(b, crlfcrlf)
	if end < 0 {
		if len(b) > maxHead {
			return parseRefuse
		}
		return parseMore
	}
	*h = respHead{size: end + 4}
	if end+4 > maxHead || end < 12 || string(b[:7]) != "HTTP/1." || b[7] < '0' || b[7] > '9' || b[8] != ' ' {
		return parseRefuse
	}
	st, ok := atoi(b[9:12])
	if !ok || st < 200 || st > 599 || (end > 12 && b[12] != ' ' && b[12] != '\r') {
		return parseRefuse // 600-999 would reach the client as a status no server sends
	}
	h.status = st
	sawLength := false
	i := bytes.IndexByte(b, '\n') + 1
	if b[i-2] != '\r' || hasCTL(b[:i-2]) {
		return parseRefuse // a bare LF ends the status line, or it holds a control byte
	}
	for i < end+2 {
		j := bytes.IndexByte(b[i:end+2], '\n')
		if j < 1 || b[i+j-1] != '\r' {
			return parseRefuse // a bare LF: a line the client may split elsewhere
		}
		ln := b[i : i+j-1]
		i += j + 1
		c := bytes.IndexByte(ln, ':')
		if c <= 0 || !isToken(ln[:c]) {
			return parseRefuse // no name, white space before ':', obs-fold
		}
		if hasCTL(ln[c+1:]) {
			// A bare CR, NUL or other control byte, relayed as is;
			// checked before the trim, which would take \r, \v and \f
			// off the ends.
			return parseRefuse
		}
		name, val := ln[:c], bytes.TrimSpace(ln[c+1:])
		switch {
		case fold(name, "content-length"):
			n, ok := atoi(val)
			if !ok || (sawLength && n != h.length) {
				return parseRefuse
			}
			h.length, sawLength = n, true
		case fold(name, "transfer-encoding"):
			return parseRefuse
		case fold(name, "connection"):
			h.close = h.close || hasToken(val, "close")
		}
	}
	if st == 204 || st == 304 {
		h.length = 0
		return parseOK
	}
	if !sawLength {
		return parseRefuse
	}
	return parseOK
}

var crlfcrlf = []byte("\r\n\r\n")

// hasCTL reports whether b holds a control byte other than HTAB (a bare
// CR, NUL, DEL, ...), which no line of a head relayed may carry.
func hasCTL(b []byte) bool {
	for _, ch := range b {
		if (ch < ' ' && ch != '\t') || ch == 0x7f {
			return true
		}
	}
	return false
}

// hopByHop reports whether a header is connection-specific (RFC 9110
// 7.6.1) and so never relayed by a proxy.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return fold(name, "te")
	case 7:
		return fold(name, "trailer") || fold(name, "upgrade")
	case 10:
		return fold(name, "connection") || fold(name, "keep-alive")
	case 16:
		return fold(name, "proxy-connection")
	case 17:
		return fold(name, "transfer-encoding")
	}
	return false
}

// fold reports whether b equals s, ASCII case folded (s in lower case).
func fold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// foldBytes is fold with a name that is not necessarily lower case.
func foldBytes(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds token tok
// (lower case), case-insensitively.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte{','})
		if fold(bytes.TrimSpace(t), tok) {
			return true
		}
	}
	return false
}

// inTokens reports whether the comma-separated list v names name.
func inTokens(v, name []byte) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte{','})
		if foldBytes(bytes.TrimSpace(t), string(name)) {
			return true
		}
	}
	return false
}

// isToken reports whether b is a non-empty RFC 9110 token.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return true
}

var tchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// atoi parses a non-negative decimal of at most 15 digits, nothing else
// (no sign, no white space, no list).
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// edits reports whether the Handler's edits remove or replace the
// response header name.
func (h *ResponseHead) edits(name []byte) bool { return edited(name, h.Del, h.Set) }

// edited reports whether a header named name is removed (del) or replaced
// (set) by a Handler's edits: the one rule of Decision's and
// ResponseHead's Set and Del (case-insensitive names).
func edited(name []byte, del []string, set []Header) bool {
	for _, n := range del {
		if foldBytes(name, n) {
			return true
		}
	}
	for _, f := range set {
		if foldBytes(name, f.Name) {
			return true
		}
	}
	return false
}

// appendUpstreamRequest appends the request as it goes upstream: the
// request line as HTTP/1.1, the client's headers minus hop-by-hop ones
// (and those its Connection header names) minus d's removals and
// replacements, then d's additions, then the body.
func appendUpstreamRequest(dst []byte, r *Request, d *Decision) []byte {
	dst = append(dst, r.Method()...)
	dst = append(dst, ' ')
	if d.Target != nil {
		dst = append(dst, d.Target...)
	} else {
		dst = append(dst, r.Target()...)
	}
	dst = append(dst, " HTTP/1.1\r\n"...)
	conn := r.conn.of(r.buf)
	for i := range r.headers {
		name, value := r.HeaderAt(i)
		// The body goes upstream, so its length does, whatever the
		// client's Connection field names: without it the upstream would
		// read the body as a request of its own.
		if hopByHop(name) || (len(conn) > 0 && inTokens(conn, name) && !fold(name, "content-length")) {
			continue
		}
		if edited(name, d.Del, d.Set) {
			continue
		}
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		dst = append(dst, value...)
		dst = append(dst, "\r\n"...)
	}
	for _, h := range d.Set {
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, r.Body()...)
}

// appendResponseHead appends the response head for the client: the
// upstream's status line and headers minus hop-by-hop ones and minus
// those e removes or replaces, then e's additions, plus "Connection:
// close" when the client's connection ends after it. e may be nil.
func appendResponseHead(dst, head []byte, closing bool, e *ResponseHead) []byte {
	i := 0
	for i < len(head)-2 {
		j := i
		for head[j] != '\n' {
			j++
		}
		line := head[i : j+1]
		first := i == 0
		i = j + 1
		if !first {
			name := line
			if c := indexColon(line); c >= 0 {
				name = line[:c]
			}
			if hopByHop(name) || (e != nil && e.edits(name)) {
				continue
			}
		}
		dst = append(dst, line...)
	}
	if e != nil {
		for _, h := range e.Set {
			dst = append(dst, h.Name...)
			dst = append(dst, ": "...)
			dst = append(dst, h.Value...)
			dst = append(dst, "\r\n"...)
		}
	}
	if closing {
		dst = append(dst, "Connection: close\r\n"...)
	}
	return append(dst, "\r\n"...)
}

func indexColon(b []byte) int {
	for i, c := range b {
		if c == ':' {
			return i
		}
	}
	return -1
}
