package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kube returns a valid config that discovers its backends from Kubernetes.
func kube(k Kubernetes) *Config {
	c := Default()
	c.Backends.Kubernetes = k
	return c
}

func TestKubernetesValidate(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		k    Kubernetes
		want string // "" when valid; else the one problem ("..." stands for any text)
	}{
		{"service", Kubernetes{Service: "vllm", Port: 8000}, ""},
		{"service default port", Kubernetes{Service: "vllm"}, ""},
		{"pool", Kubernetes{InferencePool: "llama.pool-1", Namespace: "models"}, ""},
		{"pool one target port", Kubernetes{InferencePool: "pool", Port: 8000}, ""},
		{"kubeconfig", Kubernetes{Service: "vllm", Kubeconfig: kubeconfig}, ""},
		{"neither", Kubernetes{Namespace: "models"}, "backends.kubernetes: set service or inference_pool"},
		{"both", Kubernetes{Service: "a", InferencePool: "b"}, "backends.kubernetes: set service or inference_pool, not both"},
		{"service name", Kubernetes{Service: "Vllm_1"}, `backends.kubernetes.service: must be a Service name...`},
		{"service too long", Kubernetes{Service: strings.Repeat("a", 64)}, `backends.kubernetes.service: must be a Service name...`},
		{"pool name", Kubernetes{InferencePool: "pool/x"}, `backends.kubernetes.inference_pool: must be an object name...`},
		{"namespace", Kubernetes{Service: "vllm", Namespace: "a.b"}, `backends.kubernetes.namespace: must be a namespace name...`},
		{"port", Kubernetes{Service: "vllm", Port: 70000}, "backends.kubernetes.port: must be a port in 1..65535, or 0 for the default, got 70000"},
		{"negative port", Kubernetes{InferencePool: "p", Port: -1}, "backends.kubernetes.port: must be a port in 1..65535, or 0 for the default, got -1"},
		{"missing kubeconfig", Kubernetes{Service: "vllm", Kubeconfig: "/nonexistent/kc"}, `backends.kubernetes.kubeconfig: cannot read "/nonexistent/kc": no such file or directory`},
		{"kubeconfig dir", Kubernetes{Service: "vllm", Kubeconfig: t.TempDir()}, "backends.kubernetes.kubeconfig: \"...\" is a directory, not a kubeconfig file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := kube(tt.k).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			errs := problems(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(errs), errs)
			}
			got := errs[0].String()
			path, _, _ := strings.Cut(tt.want, ":")
			if head, tail, ok := strings.Cut(tt.want, "..."); ok {
				if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) {
					t.Fatalf("got  %q\nwant %q", got, tt.want)
				}
			} else if got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
			if errs[0].Path != path {
				t.Fatalf("Path = %q, want %q", errs[0].Path, path)
			}
		})
	}
}

func TestKubernetesIsOneSourceOfThree(t *testing.T) {
	for _, mod := range []func(c *Config){
		func(c *Config) { c.Backends.Static = []string{"http://127.0.0.1:8001"} },
		func(c *Config) { c.Backends.DNS = "vllm:8000" },
	} {
		c := kube(Kubernetes{Service: "vllm"})
		mod(c)
		errs := problems(t, c.Validate())
		if len(errs) != 1 || errs[0].String() != "backends: set only one of static, dns and kubernetes" {
			t.Fatalf("got %v", errs)
		}
	}
}

func TestKubernetesParse(t *testing.T) {
	c, err := Parse([]byte("backends:\n  kubernetes:\n    inference_pool: llama\n    namespace: models\n    port: 8000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Kubernetes{InferencePool: "llama", Namespace: "models", Port: 8000}
	if c.Backends.Kubernetes != want {
		t.Fatalf("got %+v, want %+v", c.Backends.Kubernetes, want)
	}
	_, err = Parse([]byte("backends:\n  kubernetes:\n    sevice: vllm\n"))
	errs := problems(t, err)
	if len(errs) == 0 || errs[0].String() != "unknown key backends.kubernetes.sevice (did you mean backends.kubernetes.service?)" {
		t.Fatalf("got %v", errs)
	}
}
