package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// String returns d in Go duration syntax, e.g. "5ms".
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML decodes a scalar in Go duration syntax ("5ms", "2s", "1m30s";
// a bare "0" is zero). Anything else is an error of the form
// `invalid duration "5 ms"`; Parse prefixes it with the key's path.
func (d *Duration) UnmarshalYAML(value *yaml.Node) error {
	v, err := parseDuration(value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML encodes d in Go duration syntax, so that a marshalled Config
// parses back to an equal Config.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func parseDuration(n *yaml.Node) (Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("must be a duration such as \"5ms\" or \"2s\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", n.Value)
	}
	return Duration(v), nil
}
