package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/probegate/probegate/internal/config"
)

// manifestDoc is the part of a Kubernetes object the checks below read.
type manifestDoc struct {
	Kind     string                `yaml:"kind"`
	Metadata struct{ Name string } `yaml:"metadata"`
	Data     map[string]string     `yaml:"data"`
	Rules    []struct {
		APIGroups     []string `yaml:"apiGroups"`
		Resources     []string `yaml:"resources"`
		ResourceNames []string `yaml:"resourceNames"`
		Verbs         []string `yaml:"verbs"`
	} `yaml:"rules"`
	Subjects []struct{ Kind, Name string } `yaml:"subjects"`
	RoleRef  struct{ Kind, Name string }   `yaml:"roleRef"`
	Spec     struct {
		Template struct {
			Spec struct {
				ServiceAccountName string `yaml:"serviceAccountName"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readManifest(t *testing.T, path string) []manifestDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []manifestDoc
	for {
		var d manifestDoc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s is not YAML: %v", path, err)
		}
		if d.Kind != "" {
			docs = append(docs, d)
		}
	}
}

// Every shipped manifest's embedded configuration passes `probegate
// -check`, and a manifest that discovers its backends through the
// Kubernetes API grants its Deployment's service account exactly the
// reads that source makes.
func TestDeployManifests(t *testing.T) {
	paths, err := filepath.Glob("deploy/*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("manifests: %v %v", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			docs := readManifest(t, path)
			var cfgText string
			for _, d := range docs {
				if d.Kind == "ConfigMap" && d.Data["config.yaml"] != "" {
					cfgText = d.Data["config.yaml"]
				}
			}
			if cfgText == "" {
				t.Skip("no ConfigMap with config.yaml (not a deployment manifest)")
			}
			file := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(file, []byte(cfgText), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := run([]string{"-config", file, "-check"}, &out, &errOut, nil, nil); code != 0 {
				t.Fatalf("-check exit %d:\n%s", code, errOut.String())
			}
			cfg, err := config.Parse([]byte(cfgText))
			if err != nil {
				t.Fatal(err)
			}
			checkRBAC(t, docs, cfg.Backends.Kubernetes)
		})
	}
}

// rule is one granted (group, resource, name) read.
type rule struct{ group, resource, name string }

func checkRBAC(t *testing.T, docs []manifestDoc, k config.Kubernetes) {
	t.Helper()
	var want []rule
	switch {
	case k.Service != "":
		want = []rule{{"discovery.k8s.io", "endpointslices", ""}}
	case k.InferencePool != "":
		want = []rule{{"inference.networking.k8s.io", "inferencepools", k.InferencePool}, {"", "pods", ""}}
	}
	sa := ""
	for _, d := range docs {
		if d.Kind == "Deployment" {
			sa = d.Spec.Template.Spec.ServiceAccountName
		}
	}
	var got []rule
	bound := false
	for _, d := range docs {
		switch d.Kind {
		case "Role", "ClusterRole":
			for _, r := range d.Rules {
				v := slices.Clone(r.Verbs)
				slices.Sort(v)
				if !slices.Equal(v, []string{"get", "list", "watch"}) {
					t.Errorf("%s %s grants %v, want exactly get, list, watch", d.Kind, d.Metadata.Name, r.Verbs)
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						if len(r.ResourceNames) == 0 {
							got = append(got, rule{g, res, ""})
						}
						for _, n := range r.ResourceNames {
							got = append(got, rule{g, res, n})
						}
					}
				}
			}
		case "RoleBinding":
			for _, s := range d.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == sa && sa != "" {
					bound = true
				}
			}
		}
	}
	sortRules := func(r []rule) {
		slices.SortFunc(r, func(a, b rule) int {
			if a.resource != b.resource {
				if a.resource < b.resource {
					return -1
				}
				return 1
			}
			return 0
		})
	}
	sortRules(want)
	sortRules(got)
	if !slices.Equal(got, want) {
		t.Fatalf("RBAC grants %v, the configured source reads %v", got, want)
	}
	if len(want) > 0 && !bound {
		t.Fatalf("the Deployment's service account %q is bound to no Role", sa)
	}
}
