package route

import (
	"strings"
	"testing"
)

// Spellings of a request target that TestAllowPathsTricks does not try:
// path parameters, encoded separators and fragments, overlong and
// bidirectional UTF-8, encoded whitespace, a trailing dot, backslashes
// after "..", a "#" ending an absolute-form authority, and a path that
// climbs back out of 2,000 segments. None reaches an operator path, and
// whatever is forwarded is the normalized path that was decided on.
func TestAllowPathsHostileSpellings(t *testing.T) {
	rec := &pathRecorder{}
	up := upstream(t, rec.handler)
	tp := startProxy(t, withDefaultAllow(testConfig(up.URL)))
	cases := []struct {
		target  string
		want    int
		forward string
	}{
		{"/v1/completions;/../../metrics", 404, ""},
		{"/v1/completions/..;/metrics", 404, ""},
		{"/v1/completions;x", 404, ""},
		{"/v1/completions%3b", 404, ""},
		{"/v1/completions%23/../../metrics", 404, ""},
		{"/v1/completions%2F", 404, ""},
		{"/v1/models/..%5c..%5cmetrics", 404, ""},
		{"/v1/%c0%ae%c0%ae/metrics", 404, ""}, // overlong "."
		{"/v1/%e2%80%ae", 404, ""},            // U+202E
		{"/v1/completions%20", 404, ""},
		{"/v1/completions%09", 404, ""},
		{"/v1/completions.", 404, ""},
		{"/./metrics", 404, ""},
		// The authority of an absolute URI ends at "/", "?" or "#" (RFC
		// 3986 section 3.2): here it is "gw", the path empty and the rest
		// a fragment, which no request target carries (RFC 9112 section
		// 3.2). Taking the path after the "#" forwarded it.
		{"http://gw#/v1/completions", 404, ""},
		{"http://gw#/metrics", 404, ""},
		{"http://g#w/v1/completions", 404, ""},
		{"/" + strings.Repeat("a/", 2000) + strings.Repeat("../", 2000) + "metrics", 404, ""},
		// Allowed, forwarded normalized; a query is the client's own.
		{"/" + strings.Repeat("a/", 2000) + strings.Repeat("../", 2000) + "v1/completions", 200, "/v1/completions"},
		{"/v1/completions/.", 200, "/v1/completions"},
		{"/v1/completions?/../metrics", 200, "/v1/completions?/../metrics"},
	}
	for _, c := range cases {
		got := rawRequest(t, tp.addr, "POST", c.target)
		seen := rec.take()
		name := c.target
		if len(name) > 60 {
			name = name[:60] + "..."
		}
		if got != c.want {
			t.Errorf("POST %s: status %d, want %d (the pod saw %q)", name, got, c.want, seen)
			continue
		}
		if c.want == 200 && (len(seen) != 1 || seen[0] != "POST "+c.forward) {
			t.Errorf("POST %s: the pod saw %q, want %q", name, seen, "POST "+c.forward)
		}
		if c.want != 200 && len(seen) > 0 {
			t.Errorf("POST %s: refused, yet the pod saw %q", name, seen)
		}
	}
}
