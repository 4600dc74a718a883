package vllmsim

import (
	"net/http"
	"strings"
)

// handler returns the generation's HTTP handler: serveHTTP, writing
// lowercase header names when Config.LowercaseHeaders is set.
func (g *generation) handler() http.Handler {
	if !g.cfg.LowercaseHeaders {
		return http.HandlerFunc(g.serveHTTP)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serveHTTP(&lowercaseWriter{ResponseWriter: w}, r)
	})
}

// lowercaseWriter lowercases the names of the headers a handler set before
// they are written, as uvicorn does. net/http writes the names of a
// Header map as they are; the ones it adds itself (Date, Content-Length)
// stay canonical.
type lowercaseWriter struct {
	http.ResponseWriter
	lowered bool
}

func (w *lowercaseWriter) lower() {
	if w.lowered {
		return
	}
	w.lowered = true
	h := w.ResponseWriter.Header()
	for k, v := range h {
		if lk := strings.ToLower(k); lk != k && v != nil {
			delete(h, k)
			h[lk] = append(h[lk], v...)
		}
	}
	//lint:ignore SA1008 the lowercase name is the point: vLLM writes it so.
	if _, ok := h["content-type"]; ok {
		// A nil canonical entry stops net/http from adding a sniffed
		// Content-Type of its own beside the lowercase one.
		h["Content-Type"] = nil
	}
}

func (w *lowercaseWriter) WriteHeader(code int) {
	w.lower()
	w.ResponseWriter.WriteHeader(code)
}

func (w *lowercaseWriter) Write(b []byte) (int, error) {
	w.lower()
	return w.ResponseWriter.Write(b)
}

// FlushError lowercases the headers if they were not written yet, then
// flushes (http.ResponseController finds it).
func (w *lowercaseWriter) FlushError() error {
	w.lower()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *lowercaseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
