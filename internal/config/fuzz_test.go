package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse checks Parse's contract on arbitrary bytes: it never panics; it
// returns exactly one of a config and an error; a returned config is valid
// and survives a marshal/parse round trip unchanged.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "..", "config.yaml")); err == nil {
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte(base + "probe:\n  dedline: 5ms\n"))
	f.Add([]byte("backends: {dns: \"vllm:8000\"}\nroute: {d: &x 3}\nprobe: {quorum: *x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v", c, err)
		}
		if err != nil {
			_ = err.Error()
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse returned an invalid config: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-Parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}
