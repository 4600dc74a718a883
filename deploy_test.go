package main

import (
	"errors"
	"io"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/probegate/probegate/internal/config"
)

// The configuration shipped in deploy/kubernetes.yaml must stay valid as
// the config schema evolves.
func TestDeployManifestConfigIsValid(t *testing.T) {
	f, err := os.Open("deploy/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	found := false
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("manifest is not YAML: %v", err)
		}
		if doc.Kind != "ConfigMap" {
			continue
		}
		found = true
		if _, err := config.Parse([]byte(doc.Data["config.yaml"])); err != nil {
			t.Fatalf("the ConfigMap's config.yaml is invalid:\n%v", err)
		}
	}
	if !found {
		t.Fatal("no ConfigMap with config.yaml in deploy/kubernetes.yaml")
	}
}
