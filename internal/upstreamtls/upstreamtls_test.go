package upstreamtls

import (
	"crypto/tls"
	"testing"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/testutil"
)

// A Host names its backend's host unless server_name names another, and
// keeps one *tls.Config until its Source changes: the pointer is how a
// pooled connection knows it is current. A nil Source is the default.
func TestHostConfig(t *testing.T) {
	var nilSrc *Source
	h := nilSrc.Host("10.0.0.7:8000")
	c := h.Config()
	if c.ServerName != "10.0.0.7" || c.RootCAs != nil || len(c.Certificates) != 0 || c.InsecureSkipVerify {
		t.Fatalf("default config %+v", c)
	}
	if h.Config() != c {
		t.Error("an unchanged default derived a new config")
	}

	src := NewSource(config.ClientTLS{Config: &tls.Config{}})
	h = src.Host("vllm-0.models:8000")
	c = h.Config()
	if c.ServerName != "vllm-0.models" {
		t.Fatalf("server name %q", c.ServerName)
	}
	if src.Store(config.ClientTLS{Config: &tls.Config{ServerName: "ignored"}}) {
		t.Error("a ClientTLS with the same Sum counted as a change")
	}
	if h.Config() != c {
		t.Error("a Store that changed nothing replaced the config")
	}
	named := config.ClientTLS{Config: &tls.Config{ServerName: "vllm.models.svc"}, Sum: [32]byte{1}}
	if !src.Store(named) {
		t.Fatal("another Sum did not count as a change")
	}
	c2 := h.Config()
	if c2 == c || c2.ServerName != "vllm.models.svc" {
		t.Fatalf("after the change: same pointer %v, server name %q", c2 == c, c2.ServerName)
	}
	if named.Config.ServerName != "vllm.models.svc" || c2 == named.Config {
		t.Error("the Source's shared config was handed out or modified")
	}

	// Dials deriving at once all end up with one config.
	src.Store(config.ClientTLS{Config: &tls.Config{}, Sum: [32]byte{2}})
	got := make([]*tls.Config, 8)
	testutil.Together(8, func(i int) { got[i] = h.Config() })
	for _, g := range got {
		if g != h.Config() {
			t.Fatal("concurrent dials kept different configs")
		}
	}
}
