package route

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
)

// allowList is route.allow_paths compiled: which request paths, with which
// methods, may reach a backend. It decides on the normalized path
// (normalizePath) and the handler forwards exactly that path, so no
// spelling of a request target can be judged one path here and routed as
// another by the model server. Immutable; safe for concurrent use.
type allowList struct {
	all      bool                 // "/*" with any method: forward everything untouched
	exact    map[string]methodSet // exact paths
	prefixes []prefixRule         // "/p/*" patterns, longest first
	allowHdr map[string]string    // Allow header value per exact path (405 answers)
}

type prefixRule struct {
	prefix  string // ends with "/"
	methods methodSet
}

// methodSet is a set of HTTP methods; 0 means any method.
type methodSet uint8

const (
	mGET methodSet = 1 << iota
	mHEAD
	mPOST
	mPUT
	mPATCH
	mDELETE
	mOPTIONS
)

var methodBits = map[string]methodSet{
	"GET": mGET | mHEAD, "HEAD": mHEAD, "POST": mPOST, "PUT": mPUT,
	"PATCH": mPATCH, "DELETE": mDELETE, "OPTIONS": mOPTIONS,
}

// has reports whether the set admits method.
func (s methodSet) has(method []byte) bool {
	if s == 0 {
		return true
	}
	var m methodSet
	switch string(method) {
	case "GET":
		m = mGET
	case "HEAD":
		m = mHEAD
	case "POST":
		m = mPOST
	case "PUT":
		m = mPUT
	case "PATCH":
		m = mPATCH
	case "DELETE":
		m = mDELETE
	case "OPTIONS":
		m = mOPTIONS
	}
	return s&m != 0
}

// String lists the set for an Allow header.
func (s methodSet) String() string {
	var out []string
	for _, name := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		if s.has([]byte(name)) {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

// compileAllow builds the allowList of route.allow_paths entries, which
// internal/config validated.
func compileAllow(entries []string) (*allowList, error) {
	a := &allowList{exact: map[string]methodSet{}, allowHdr: map[string]string{}}
	for _, e := range entries {
		r, err := config.ParseAllowRule(e)
		if err != nil {
			return nil, err
		}
		var ms methodSet
		for _, m := range r.Methods {
			ms |= methodBits[m]
		}
		switch {
		case r.Prefix && r.Path == "/" && ms == 0:
			a.all = true
		case r.Prefix:
			a.prefixes = append(a.prefixes, prefixRule{prefix: r.Path, methods: ms})
		default:
			if prev, ok := a.exact[r.Path]; ok && (prev == 0 || ms == 0) {
				ms = 0 // any method
			} else {
				ms |= prev
			}
			a.exact[r.Path] = ms
		}
	}
	for p, ms := range a.exact {
		a.allowHdr[p] = ms.String()
	}
	// Longest prefix first, so a narrower rule decides its subtree.
	for i := 1; i < len(a.prefixes); i++ {
		for j := i; j > 0 && len(a.prefixes[j].prefix) > len(a.prefixes[j-1].prefix); j-- {
			a.prefixes[j], a.prefixes[j-1] = a.prefixes[j-1], a.prefixes[j]
		}
	}
	return a, nil
}

// check decides on a normalized path: 0 (forward), 404 (path not allowed)
// or 405 (path allowed with other methods; allow is the Allow header).
func (a *allowList) check(method, path []byte) (status int, allow string) {
	if ms, ok := a.exact[string(path)]; ok {
		if ms.has(method) {
			return 0, ""
		}
		return fasthttp.StatusMethodNotAllowed, a.allowHdr[string(path)]
	}
	for _, r := range a.prefixes {
		if len(path) > len(r.prefix) && bytes.HasPrefix(path, []byte(r.prefix)) {
			if r.methods.has(method) {
				return 0, ""
			}
			return fasthttp.StatusMethodNotAllowed, r.methods.String()
		}
	}
	return fasthttp.StatusNotFound, ""
}

// normalizePath appends to dst the normalized path of a request target
// (origin form "/p?q" or absolute form "http://h/p?q"): percent-decoded,
// empty and "." segments dropped, ".." resolved, no trailing slash, and
// returns it with the raw query (without "?"). ok is false for a target
// that cannot name a path safely: not starting with "/" once the scheme
// and authority are gone, a fragment, a bad or NUL-producing escape, a
// ".." above the root, or any byte outside config.PathByteOK after
// decoding (control bytes, non-ASCII, '%', '\', '*', quotes). What it
// returns needs no re-encoding: it is forwarded as is.
func normalizePath(dst, target []byte) (path, query []byte, ok bool) {
	if i := schemeEnd(target); i > 0 {
		// The authority ends at the first "/", "?" or "#" (RFC 3986
		// section 3.2): a "?" or "#" there leaves the path empty.
		target = target[i:]
		j := bytes.IndexAny(target, "/?#")
		if j < 0 {
			target = []byte("/")
		} else if target[j] != '/' {
			return nil, nil, false
		} else {
			target = target[j:]
		}
	}
	if len(target) == 0 || target[0] != '/' || bytes.IndexByte(target, '#') >= 0 {
		return nil, nil, false
	}
	raw := target
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		raw, query = target[:i], target[i+1:]
	}
	dst = dst[:0]
	for len(raw) > 0 {
		// One segment, decoded.
		raw = raw[1:] // the '/'
		end := bytes.IndexByte(raw, '/')
		if end < 0 {
			end = len(raw)
		}
		seg := raw[:end]
		raw = raw[end:]
		start := len(dst)
		dst = append(dst, '/')
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if c == '%' {
				if i+2 >= len(seg) {
					return nil, nil, false
				}
				h, l := unhex(seg[i+1]), unhex(seg[i+2])
				if h < 0 || l < 0 {
					return nil, nil, false
				}
				c = byte(h<<4 | l)
				i += 2
			}
			if !config.PathByteOK(c) {
				return nil, nil, false // includes an encoded '/', '%', '?', '#', '\'
			}
			dst = append(dst, c)
		}
		switch string(dst[start+1:]) {
		case "", ".":
			dst = dst[:start]
		case "..":
			dst = dst[:start]
			k := bytes.LastIndexByte(dst, '/')
			if k < 0 {
				return nil, nil, false // above the root
			}
			dst = dst[:k]
		}
	}
	if len(dst) == 0 {
		dst = append(dst, '/')
	}
	return dst, query, true
}

// schemeEnd returns the length of a leading "http://" or "https://" (any
// case), or 0.
func schemeEnd(t []byte) int {
	for _, s := range []string{"http://", "https://"} {
		if len(t) >= len(s) && strings.EqualFold(string(t[:len(s)]), s) {
			return len(s)
		}
	}
	return 0
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// judge applies route.allow_paths to a request's method and target: it
// returns 0 when the request may be forwarded, or the status to answer
// with and, for 405, the Allow header value. It leaves in rc.path the
// normalized path it decided on (empty when every path is allowed: see
// reqCtx.forwardedPath), and returns the target's query. It reads the
// head alone, so the server judges a request before reading its body
// (judgeHead, Proxy.headReceived).
func (a *allowList) judge(method, target []byte, rc *reqCtx) (query []byte, status int, allow string) {
	if a.all {
		rc.path = rc.path[:0]
		return nil, 0, ""
	}
	path, query, ok := normalizePath(rc.path, target)
	if !ok {
		return nil, fasthttp.StatusNotFound, ""
	}
	rc.path = path // keep the grown buffer for the next request
	status, allow = a.check(method, path)
	return query, status, allow
}

// forwardDecided sets the target req goes upstream with to what judge
// decided on when it allowed req: the normalized path (rc.path), in origin
// form, with query, the query as the client sent it. A target already in
// that form (the usual case) is left as it is: setting it again would
// only make fasthttp parse the URI a second time.
func (a *allowList) forwardDecided(req *fasthttp.Request, rc *reqCtx, query []byte) {
	if a.all {
		return
	}
	rc.target = append(append(rc.target[:0], rc.path...), '?')
	rc.target = append(rc.target, query...)
	if len(query) == 0 {
		rc.target = rc.target[:len(rc.path)]
	}
	if !bytes.Equal(rc.target, req.Header.RequestURI()) {
		req.SetRequestURIBytes(rc.target)
	}
}
