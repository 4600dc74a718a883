package config

import (
	"errors"
	"strings"
)

// DefaultAllowPaths is route.allow_paths by default: the OpenAI-compatible
// inference surface that vLLM's API server (vllm/entrypoints/openai/
// api_server.py and the routers it mounts) serves, each with its method.
// Left out, as operator endpoints a gateway must not expose: /metrics,
// /load, /ping, /version, /server_info, /reset_prefix_cache,
// /reset_mm_cache, /sleep, /wake_up, /is_sleeping, /collective_rpc,
// /start_profile, /stop_profile, /v1/load_lora_adapter,
// /v1/unload_lora_adapter, /scale_elastic_ep, /is_scaling_elastic_ep,
// /update_weights and the like, the API docs (/docs, /redoc,
// /openapi.json), SageMaker's /invocations, and the per-pod stored
// responses (/v1/responses/{id}, which a balancer cannot route to the pod
// that holds them).
var DefaultAllowPaths = []string{
	"POST /v1/chat/completions",
	"POST /v1/completions",
	"POST /v1/embeddings",
	"POST /v1/responses",
	"POST /v1/audio/transcriptions",
	"POST /v1/audio/translations",
	"POST /v1/score",
	"POST /score",
	"POST /v1/rerank",
	"POST /rerank",
	"POST /v2/rerank",
	"POST /pooling",
	"POST /classify",
	"POST /tokenize",
	"POST /detokenize",
	"GET /v1/models",
	"GET /health",
}

// AllowRule is one parsed entry of route.allow_paths.
type AllowRule struct {
	// Methods the path accepts (upper case); empty means any method. GET
	// also admits HEAD, as the ASGI routers vLLM uses do.
	Methods []string
	// Path is the exact path, or the prefix (ending in "/") of a "/p/*"
	// pattern.
	Path string
	// Prefix is true for a "/p/*" pattern: Path and everything below it.
	Prefix bool
}

// allowMethods are the methods an entry may name.
var allowMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// ParseAllowRule parses one route.allow_paths entry: "[METHOD[,METHOD...] ]PATH"
// where PATH is an exact path ("/v1/models") or a prefix pattern
// ("/v1/files/*", everything below /v1/files/); "/*" allows every path.
// Paths are compared after the proxy's normalization (percent-decoding, no
// empty, "." or ".." segments, no trailing slash), case-sensitively, so a
// PATH must itself be in that form: "/" followed by segments of letters,
// digits and -._~!$&'()+,;=:@.
func ParseAllowRule(s string) (AllowRule, error) {
	var r AllowRule
	s = strings.TrimSpace(s)
	if m, p, ok := strings.Cut(s, " "); ok {
		for _, name := range strings.Split(m, ",") {
			if !containsString(allowMethods, name) {
				return r, errors.New("unknown method " + quote(name) + " (want one of " + strings.Join(allowMethods, ", ") + ")")
			}
			r.Methods = append(r.Methods, name)
		}
		s = strings.TrimSpace(p)
	}
	if s == "/*" {
		r.Path, r.Prefix = "/", true
		return r, nil
	}
	if strings.HasSuffix(s, "/*") {
		r.Prefix = true
		s = strings.TrimSuffix(s, "*")
	}
	if !strings.HasPrefix(s, "/") || len(s) < 2 {
		return r, errors.New("path " + quote(s) + " must start with / and name at least one segment")
	}
	body := strings.TrimSuffix(s[1:], "/")
	if r.Prefix != strings.HasSuffix(s, "/") {
		return r, errors.New("path " + quote(s) + ": no trailing slash (use /p/* for a prefix)")
	}
	for _, seg := range strings.Split(body, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return r, errors.New("path " + quote(s) + ": empty, . or .. segment")
		}
		for i := 0; i < len(seg); i++ {
			if !PathByteOK(seg[i]) {
				return r, errors.New("path " + quote(s) + ": character " + quote(seg[i:i+1]) + " not allowed (patterns are plain paths; only a final /* is special)")
			}
		}
	}
	r.Path = s
	return r, nil
}

// PathByteOK reports whether c may appear in a path segment as the proxy
// compares and forwards it: RFC 3986 unreserved characters and the
// sub-delimiters, ':' and '@', except '*' (reserved for patterns).
func PathByteOK(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()+,;=:@", c) >= 0
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quote(s string) string { return `"` + s + `"` }
