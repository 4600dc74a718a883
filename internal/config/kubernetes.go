package config

import (
	"errors"
	"os"
	"regexp"
)

// dns1123Label is a Kubernetes object name of the DNS-1123 label kind
// (Services, namespaces): at most 63 characters.
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// dns1123Subdomain is a Kubernetes object name of the DNS-1123 subdomain
// kind (custom resources such as InferencePool): at most 253 characters.
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// kubernetes checks backends.kubernetes, which is known to be set.
func (v *checker) kubernetes(k Kubernetes) {
	const base = "backends.kubernetes"
	switch {
	case k.Service == "" && k.InferencePool == "":
		v.add(base, "set service or inference_pool")
	case k.Service != "" && k.InferencePool != "":
		v.add(base, "set service or inference_pool, not both")
	}
	if k.Service != "" && (len(k.Service) > 63 || !dns1123Label.MatchString(k.Service)) {
		v.add(base+".service", "must be a Service name (lowercase letters, digits and '-', at most 63), got %q", k.Service)
	}
	if k.InferencePool != "" && (len(k.InferencePool) > 253 || !dns1123Subdomain.MatchString(k.InferencePool)) {
		v.add(base+".inference_pool", "must be an object name (lowercase letters, digits, '-' and '.', at most 253), got %q", k.InferencePool)
	}
	if k.Namespace != "" && (len(k.Namespace) > 63 || !dns1123Label.MatchString(k.Namespace)) {
		v.add(base+".namespace", "must be a namespace name (lowercase letters, digits and '-', at most 63), got %q", k.Namespace)
	}
	if k.Port < 0 || k.Port > 65535 {
		v.add(base+".port", "must be a port in 1..65535, or 0 for the default, got %d", k.Port)
	}
	if k.Kubeconfig != "" {
		if st, err := os.Stat(k.Kubeconfig); err != nil {
			v.add(base+".kubeconfig", "cannot read %q: %v", k.Kubeconfig, unwrapPathError(err))
		} else if st.IsDir() {
			v.add(base+".kubeconfig", "%q is a directory, not a kubeconfig file", k.Kubeconfig)
		}
	}
}

// unwrapPathError drops the path that the message already names.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
